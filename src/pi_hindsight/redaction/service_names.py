"""Services whose keys have no shape of their own, and what their keys look like: a token
right after such a name (``instamojo 'ZrGO…'``, ``cloudsmith: "6fd0…"``, ``jira Z7Vo…``) is a
key when it has that service's shape, as a token after a secret word is.

The names and shapes are facts from a public secret scanner's rule set (trufflehog's detectors:
the service names they look for, and the alphabet and length of the key each captures), kept to
names of five letters or more (and ``jira``, ``luno``) that are no English word or everyday
tech term (``hive``, ``kanban``, ``docker``, ``redis`` are left out: a token after them is as
often an id, a digest or a hash) and no service whose keys have a shape of their own (found by
that shape: :mod:`.tokens`, :mod:`.vendors`). A name counts at the start of a name part
(``metabase_url``), never inside a longer word.

Each entry is ``name`` or ``name:shape,shape``; a shape is an alphabet — ``d`` digits, ``l``
lowercase letters, ``h`` lowercase hex, ``u`` uppercase letters, ``H`` uppercase hex, and the
literal characters ``-_=/+.^!?#:*;`` — then the length, a range (``20-40``) or a minimum (``16+``).
Lengths under 16 are left out (the context rule looks at 16 characters or more), except a
single length of 12 or more, which only a name holding a secret word as well takes
(``cashboard_key: "F1A-NEI-HY4-PZK"``: :mod:`.assignments`); so are digits alone (an id, not a
key) and letters of one case alone (random or an acronym: no rule can tell); a service without
another shape is not listed.

A name that holds both a service's name and a secret word (``cloudinary_apiSecret``) takes a
value of one of that service's shapes of a single length (:func:`service_key_exact`) even where
the value rules would read it as an identifier or find it too short.
"""

from __future__ import annotations

import functools
import re

__all__ = ["SERVICE_NAMES", "find_service", "service_key_exact", "service_key_fits"]

_TABLE = """
    abuseipdb:dl80 abyssale:dlu40 accuweather:dlu32,dlu35 adobe:dl32 adzuna:dl32
    aeroworkflow:dlu^!?#:*;20 airbrake:dlu-32,dlu-40 airvisual:dl-36 aiven:dlu=/+372 alconost:dl32
    alegra:dl-20 aletheia:du32 alienvault:dl64 allsports:dl64 amadeus:dlu16,dlu32 ambee:dh64
    amplitude:dh32 anypoint:dh32,dhH32 apacta:dl-36 api2cart:dh32 apideck:dlu40 apiflash:dl32
    apilayer:dlu32 apimatic:dlu-_64 apimetrics:dlu32 apitemplate:dlu39 appcues:dl-36,dl-39
    appointedd:dlu=+88 appsynergy:dl64 apptivo:dl-36,dlu-32 artifactory:dl64,dlu73
    artsy:dlu20,dlu32 asana:dl/51 assemblyai:dl32 atera:dl32 atlassian:dlu24
    autodesk:dlu16,dlu32 autoklose:dlu-32 aviationstack:dl32 axonaut:dl32 aylien:dl32
    beebole:dl40 besnappy:dh64 betterstack:dlu24 billomat:dh32,dl16-20 bitbar:dlu32
    bitbucket:dl=_-64,dlu32 bitcoinaverage:dlu43 bitfinex:dlu-_43 bitly:dlu-40 blitapp:dlu-_39
    boostnote:dh64 borgbase:dlu-_/.148-152 braintree:dh32,dl16 brandfetch:dlu40
    browserstack:dlu20 browshot:dlu-28 bscscan:du34 buddyns:dl40 bugherd:dl22
    bulksms:dH-37,dlu29 buttercms:dl40 calendarific:dlu32 calorieninja:dlu40 campayn:dl64
    capsulecrm:dlu-_=+.64 captaindata:dh64 carboninterface:dlu21 cashboard:dl16+,du-15 caspio:dl50
    censys:dl-36,dlu32 centralstation:dl30 cexio:dlu24-27 chartmogul:dl32 chatfuel:dlu128
    checklyhq:dl32 clarifai:dlu32 clearbit:dl_35 clickhelp:dlu24 clientary:dlu-16-25,dlu24-26
    clinchpad:dl32 clockify:dlu48 cloudelements:dl32,dlu43 cloudimage:dl_30 cloudinary:dlu-_27
    cloudmersive:dl-36 cloudplan:du-32 cloudsmith:dh40 cloverly:dl_28 clustdoc:dlu60
    codacy:dlu20 codeclimate:dh40 codequiry:dlu-64 coinapi:du-36 coinlayer:dl32 coinlib:dl16
    commercejs:dl_48 companyhub:dlu-=16-32,dlu20 confluence:dlu24 convertkit:dlu_22
    countrylayer:dl32 coveralls:dlu-37 craftmypdf:dlu35 crowdin:dlu80 cryptocompare:dl-64
    currencycloud:dl64 currencyfreaks:dl32 currencylayer:dl32 currencyscoop:dl32
    currentsapi:dlu-_48 customerguru:dlu30,dlu50 customerio:dlu20 dareboost:dlu60 deepai:dl-36
    deepgram:dl40 demio:dlu16-20,dlu32 detectify:dl32 detectlanguage:dl32 diffbot:dl32
    diggernaut:dl40 disqus:dlu64 dnscheck:dlu-36,dlu32 docparser:dh40 docsearch:dlu32
    dronahq:dl50 droneci:dlu32 dwolla:dlu-50 dynalist:dlu-_128 dyspatch:du52 easyinsight:dlu20
    edamam:dl32 elasticemail:dlu-_96 enablex:dl24,dlu36 envoy:dlu220 etherscan:du34
    ethplorer:dlu-22 eventbrite:du20 exchangerate:dh24,dl32 exportsdk:dl-36 extractorapi:dlu-40
    faceplusplus:dlu-_32 fastforex:dl-28 fastly:dlu-_32 feedier:dlu32 fetchrss:dlu.40
    fileio:du-.39 financialmodelingprep:dlu32 finnhub:dl20 flickr:dl32 flightapi:dl24
    flightstats:dl32 flowflu:dlu16-30,dlu51 formcraft:dl16 formsite:dlu32 foursquare:du48
    freshbooks:dl64 freshdesk:dlu20 freshworks:dlu-_16-20,dlu-_22 fullstory:dlu-/+88
    fxmarket:dlu-_=20 geckoboard:dlu44 geoapify:dl32 geocodify:dl40 geoip:dlu16 getgeo:dl40
    getgist:dlu=+68 getresponse:dl32 getsandbox:dl-16-30,dl-40 gitter:dl-40 glassnode:dlu27
    goodday:dl32 graphcms:dl25 graphhopper:dl-36 groovehq:dlu64 gtmetrix:dh32 gumroad:dlu-43
    gyazo:dlu-43 happyscribe:dlu24 hasura:dlu64 hellosign:dlu-/+64 helpcrunch:dlu-=/+328
    helpscout:dl40 hereapi:dlu43 hiveage:dlu-_20 holidayapi:dl-36 html2pdf:dlu64 hybiscus:dlu43
    hypertrack:dlu-_27,dlu-_54 iconfinder:dlu64 iexcloud:dl_35 imagekit:dlu_=36 imagga:dlu=72
    infura:dl32 insightly:dl-36 instamojo:dlu128,dlu40 intrinio:dlu44 invoiceocean:dlu20
    ip2location:du32 ipapi:dl32 ipgeolocation:dl32 ipifi:dlu_32 ipinfo:dl64 ipquality:dlu32
    ipstack:dhH32 jira:dlu-24 jotform:dl32 jumpcloud:dlu40 jupiterone:dlu76
    karmacrm:dlu20 klipfolio:dh40 knapsackpro:dl32 kucoin:dh24 kylas:dl-36 languagelayer:dl32
    larksuite:dlu32 leadfeeder:dlu-43 lemlist:dh32 lessannoyingcrm:dlu-57 lexigram:dlu301
    linenotify:dlu43 linkpreview:dlu32 liveagent:dlu32 loadmill:dlu40 lokalise:dl40
    loyverse:dl-32 lunchmoney:dh50 luno:dlu-_43 madkudu:dh32 magicbell:dlu-40 mailboxlayer:dl32
    mailerlite:dl32 mailjet:dlu32 mandrill:dlu-_22 mapquest:dlu32 marketstack:dl32
    mattermost:dl26 mavenlink:dl64 meaningcloud:dl32 mediastack:dl32 meistertask:dlu43
    meraki:dh40 mesibo:dlu64 messagebird:dlu-_25 metaapi:dh24,dh64 metabase:dlu-36 metrilo:dl16
    mindmeister:dlu43 mixmax:dlu-_36 mixpanel:dlu-.30-40,dlu-32 moonclerk:dl32 moralis:dlu64
    mrticktock:dlu_=16-50 netcore:dlu-32 nethunt:dl-36,dlu-.25-30 netsuite:dlu64
    neutrino:dlu16-24,dlu48 newsapi:dl32 newscatcher:dlu_43 nexmo:dlu-_16 nicereply:dh40
    numverify:dl32 nutritionix:dl32 nylas:dlu30 oanda:dlu24 omnisend:dlu-75 onedesk:dlu=16-64
    onepagecrm:dl24,dlu=44 onfleet:dl32 oopspam:dlu40 opencagedata:dl32 openuv:dl32
    openweather:dl32 optimizely:dlu-54 overloop:dlu-_50 owlbot:dl40 packagecloud:dh48
    pandadoc:dlu40 paperform:dlu-_.850+ paralleldots:dlu43 parseur:dh40 partnerstack:dlu64
    pastebin:dlu_32 paydirtapp:dl32 paymoapp:dlu44 paymongo:dlu_32 pdflayer:dl32 pdfshift:dh32
    peopledatalabs:dl64 pepipost:dlu-32 pipedream:dl32 pipedrive:dlu40 pixabay:dl-34
    plaid:dh24,dh30 planviewleankit:dh128 planyo:dl62 plivo:dlu-_40 podio:dl32 pollsapi:du28
    poloniex:dh128 positionstack:dlu_32 postageapp:dlu32 powrbot:dlu40 prodpad:dh64
    prospectcrm:dl-32 proxycrawl:dlu_22 purestake:dlu40 pushbullet:dlu_.34 qualaroo:dlu=64
    qubole:dl64 rapidapi:dlu-_50 reachmail:dlu-_64 rebrandly:dlu_32 redhat:dl32
    repairshopr:dlu-51,dlu_+.16-32 replyio:dlu24 revampcrm:dlu-.25-30 ringcentral:dlu-_22
    ritekit:dh44 rocketreach:dl-39 ronin:dlu-16-25,dlu24-26 route4me:du32 rownd:dl48
    runrunit:dh32,dlu18-20 salescookie:dl-32 salesflare:dlu_45 salesmate:dlu16-22
    satismeter:dlu24,dlu32 saucelabs:dlu-_.16-70 scalr:dl16-50,dlu_.136 scrapeowl:dl30
    scraperapi:dl32 scraperbox:du32 scrapestack:dl32 scrapingant:dl32 scrapingbee:du80
    screenshotlayer:dlu_32 scrutinizer:dl64 securitytrails:dlu32 selectpdf:dl-36
    sendbird:dh24,dh40 serphouse:dlu60 serpstack:dl32 sheety:dl32,dl64 sherpadesk:dl32
    shodan:dlu32 shotstack:dlu40 shutterstock:dlu16,dlu32 signable:dlu-32 signalwire:dlu50
    signaturit:dlu86 signupgenius:dlu32 sigopt:du48 simfin:dlu32 simplesat:dl40
    simplynoted:dlu340-360 simvoly:dl33 siteleaf:dl32 skybiometry:dl25-26
    smartystreets:dl-36,dlu20 smooch:dlu-_86 snipcart:dlu_75 sourcegraph:dhH40 sparkpost:dlu40
    spoonacular:dl32 sportsmonk:dlu60 sslmate:dlu36 statuscake:dlu20 statuspage:dl-36
    statuspal:dlu32 stitchdata:dl_35 stockdata:dlu40 storecove:dlu-_43 stormboard:dh40
    stormglass:dl-73 storychief:dlu-_.940+ strava:dl40 stytch:dl-49 sugester:dlu32,dlu_+.16-32
    surveyanyplace:dlu-36,dlu32 surveybot:dlu-80 surveysparrow:dlu-_88 survicate:dl32
    taxjar:dl32 teamgate:dl40,dlu80 technicalanalysis:du48 tefter:dlu20 teletype:dlu-64
    testingbot:dl32 textanywhere:dlu24 textmagic:dlu16-25,dlu30 theodds:dh32
    thinkific:dh32,dlu16-40 thousandeyes:dlu32 ticketmaster:dlu32 tiingo:dl40 timecamp:dl26
    timezoneapi:lu20 tmetric:du64 todoist:dl40 tomtom:dlu32 tradier:dlu28 travelpayouts:dl32
    trello:dlu-32 twelvedata:dl32 tyntec:dlu32 typetalk:dlu32,dlu64 unsplash:dlu_43
    upcdatabase:du32 uplead:dl-32 uploadcare:dl20 upwave:dl32 urlscan:dl-36 userflow:dl_29
    userstack:dl32 vatlayer:dl32 verimail:du32 veriphone:du32 versioneye:dlu-40 virustotal:dh64
    visualcrossing:du25 voodoosms:dlu46 vouchery:dl-36,dlu-16-20 vpnapi:dlu32 vultr:du36
    walkscore:dl32 weatherbit:dl32 weatherstack:dl32 webex:dh64,dlu-_106 webflow:dl64
    webscraper:dlu60
    webscraping:dlu32 websitepulse:dh32,dlu_.16-22 wepay:dlu_62 whoxy:dl33 wistia:dl64
    worksnaps:dlu40 workstack:dlu60 worldcoinindex:dlu35 worldweather:dl31 yandex:dlu.83
    youneedabudget:dh64 yousign:dl32 zendesk:dlu-_40 zenrows:dh40 zenserp:dl-36
    zeplin:dlu-.350-400 zerobounce:dl32 zerotier:dlu32 zipapi:dlu32,dlu=16+ zipbooks:dlu=16+
    zipcodeapi:dlu64 zonka:dlu36
    agora:dl32 cloze:dh32 gocanvas:dlu/+=44 hubspot:dlu-36 keenio:du64,dl24 loggly:dl-36
    onesignal:dh-36
"""
_ALPHABETS = {
    "d": "0123456789",
    "l": "abcdefghijklmnopqrstuvwxyz",
    "h": "0123456789abcdef",
    "u": "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "H": "0123456789ABCDEF",
}
_SHAPE = re.compile(r"([dlhuH=/+._^!?#:*;-]+?)(\d+)(?:(\+)|-(\d+))?")
# A shape: the characters its keys are made of, and the shortest and longest length.
Shape = tuple[frozenset[str], int, int]


def _shape(text: str) -> Shape:
    match = _SHAPE.fullmatch(text)
    if match is None:
        raise ValueError(f"bad service key shape {text!r}")
    letters, low, unbounded, high = match.groups()
    alphabet = frozenset("".join(_ALPHABETS.get(letter, letter) for letter in letters))
    top = 1 << 16 if unbounded else int(high or low)
    return (alphabet, int(low), top)


_SHAPES: dict[str, tuple[Shape, ...]] = {
    name: tuple(map(_shape, shapes.split(",")))
    for name, _, shapes in (entry.partition(":") for entry in _TABLE.split())
}
SERVICE_NAMES: tuple[str, ...] = tuple(_SHAPES)
# Names by their first four letters (every name has four or more); a name part starts after a
# character that is no lowercase letter.
_BY_HEAD: dict[str, tuple[str, ...]] = {}
for _name in SERVICE_NAMES:
    _BY_HEAD[_name[:4]] = (*_BY_HEAD.get(_name[:4], ()), _name)
_PART_HEAD = re.compile(r"(?<![a-z])(?=([a-z0-9]{4}))")


def find_service(lowered: str, start: int, end: int) -> str | None:
    """The first service name starting a name part in ``lowered[start:end]`` (lowercase text)."""
    # Memoised by the characters read (the one before ``start`` tells whether a part starts
    # there): adversarial text repeats one name tens of thousands of times.
    return _first_service((lowered[start - 1] if start else " ") + lowered[start:end])


@functools.lru_cache(maxsize=4096)
def _first_service(window: str) -> str | None:
    end = len(window)
    for head in _PART_HEAD.finditer(window, 1, end):
        for name in _BY_HEAD.get(head.group(1), ()):
            if head.start() + len(name) <= end and window.startswith(name, head.start()):
                return name
    return None


def service_key_fits(name: str, value: str) -> bool:
    """Whether ``value`` has the shape of a key of the service ``name`` (one of SERVICE_NAMES)."""
    return any(
        low <= len(value) <= high and alphabet.issuperset(value)
        for alphabet, low, high in _SHAPES[name]
    )


def service_key_exact(name: str, value: str) -> bool:
    """Whether ``value`` has the exact shape of a key of the service ``name``: one of its shapes
    of a single length (a range, ``16+`` or ``20-40``, says too little to judge a value by)."""
    return any(
        low == high == len(value) and alphabet.issuperset(value)
        for alphabet, low, high in _SHAPES[name]
    )
