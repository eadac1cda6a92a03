/**
 * The entry Pi loads. Pi names a local extension by its folder (the last path segment, `index.ts`
 * dropped) in its `[Extensions]` list: this folder makes that name `pi-hindsight`, not `shim`.
 */
export { default } from "../index.ts";
