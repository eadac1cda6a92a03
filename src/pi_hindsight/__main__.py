from pi_hindsight.cli.main import main

main()
