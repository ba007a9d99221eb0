"""Small stopword lists (en, fr, de, es), used for language detection and dropped from BM25 tokens.

Kept short on purpose: only function words, never a word that could be a technical term.
"""

from __future__ import annotations

EN = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in
    into is it its me my no not of on or our she so than that the their them then there these they
    this those to us was we were what when where which who whom why will with would you your""".split()
)
FR = frozenset(
    """au aux avec ce ces cet cette comment dans de des du elle elles en est et etre il ils je la le
    les leur leurs lui ma mais me mes moi mon ne nos notre nous on ou par pas pour qu que quel quelle
    quels quelles qui sa se ses son sont sur ta te tes toi ton tu un une vos votre vous y c d j l m n
    s t dois doit quoi faire fait ai as avons avez ont suis es sommes etes""".split()
)
DE = frozenset(
    """aber als am an auch auf aus bei bin bis bist da das dass dem den der des die dir du ein eine
    einem einen einer eines er es fur hat hatte ich ihr ihre im in ist ja kann mich mir mit nach
    nicht noch nur oder sein sich sie sind so uber um und uns unter vom von vor war waren was wenn
    wer wie wir wird wo zu zum zur""".split()
)
ES = frozenset(
    """a al con como cual cuando de del el ella ellas en es esta este esto estos hay la las le les lo
    los mas me mi muy no nos o para pero por que se sin sobre su sus te tu un una unas uno unos y ya
    yo donde hago debo""".split()
)

BY_LANG: dict[str, frozenset[str]] = {"en": EN, "fr": FR, "de": DE, "es": ES}
ALL = frozenset().union(*BY_LANG.values())

# ------------------------------------------------------------------------------ not entities
# Words that are capitalised in prose or shaped like identifiers without naming anything: the
# graph's rule extractor drops them (they are not stopwords: BM25 keeps them). Folded like the
# lists above (lower case, no accents); abbreviations are written with their dots.

#: month and weekday names, in full
CALENDAR_BY_LANG: dict[str, frozenset[str]] = {
    "en": frozenset(
        """january february march april may june july august september october november december
        monday tuesday wednesday thursday friday saturday sunday""".split()
    ),
    "fr": frozenset(
        """janvier fevrier mars avril mai juin juillet aout septembre octobre novembre decembre
        lundi mardi mercredi jeudi vendredi samedi dimanche""".split()
    ),
    "de": frozenset(
        """januar janner februar feber marz april mai juni juli august september oktober november
        dezember montag dienstag mittwoch donnerstag freitag samstag sonnabend sonntag""".split()
    ),
    "es": frozenset(
        """enero febrero marzo abril mayo junio julio agosto septiembre setiembre octubre noviembre
        diciembre lunes martes miercoles jueves viernes sabado domingo""".split()
    ),
    "zh": frozenset(
        """一月 二月 三月 四月 五月 六月 七月 八月 九月 十月 十一月 十二月 1月 2月 3月 4月 5月 6月 7月 8月
        9月 10月 11月 12月 正月 星期一 星期二 星期三 星期四 星期五 星期六 星期日 星期天 周一 周二 周三 周四
        周五 周六 周日 周天 礼拜一 礼拜二 礼拜三 礼拜四 礼拜五 礼拜六 礼拜日 礼拜天""".split()
    ),
}
#: their abbreviations (an all-capitals spelling such as DEC, SAT or DOM is an acronym, not one of these)
CALENDAR_ABBR_BY_LANG: dict[str, frozenset[str]] = {
    "en": frozenset(
        "jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur thurs fri sat sun".split()
    ),
    "fr": frozenset("janv fev fevr avr juil sept oct nov dec lun mar mer jeu ven sam dim".split()),
    "de": frozenset("jan feb mar mrz apr jun jul aug sep sept okt nov dez mo di mi do fr sa so".split()),
    "es": frozenset("ene feb mar abr may jun jul ago sep sept set oct nov dic lun mar mie jue vie sab dom".split()),
    "zh": frozenset(),
}
#: abbreviations of running text ("e.g.", "z.B.", "p. ej."): with dots they never name anything
ABBREVIATIONS_BY_LANG: dict[str, frozenset[str]] = {
    "en": frozenset(
        """e.g. i.e. etc. cf. vs. viz. approx. resp. ca. a.k.a. n.b. p.s. w.r.t. fig. figs. eq. incl.
        excl. esp. ibid.""".split()
    ),
    "fr": frozenset("p.ex. c.-a-d. c.a.d. cad n.b. p.s. cf. etc. resp. ex. vs. mme mlle".split()),
    "de": frozenset(
        """z.b. d.h. i.d.r. u.a. u.a.m. u.u. o.a. s.o. s.u. z.t. z.zt. v.a. m.e. i.a. bzw. usw. ggf. evtl.
        vgl. sog. inkl. zzgl. bspw. ca. etc.""".split()
    ),
    "es": frozenset("p.ej. ej. etc. aprox. vs. cf. sr. sra. srta. ud. uds. pag. pags. num.".split()),
    "zh": frozenset("例如 比如 譬如 诸如 即 亦即 也就是说 等等 等 参见 见 约 如下 以及".split()),
}
#: company and organisation suffixes: "Acme Inc" is a name, a lone "Inc" is not
COMPANY_SUFFIXES = frozenset(
    """inc inc. incorporated ltd ltd. limited llc llp plc corp corp. co co. gmbh mbh ag kgaa ohg e.v. sa s.a.
    s.a.s. sarl s.a.r.l. s.l. slu s.a.u. s.p.a. srl s.r.l. b.v. n.v. pty oy a/s k.k.""".split()
)
#: common function words (adverbs, prepositions, conjunctions, on/off switches) often capitalised
#: at the start of a line, in a heading or a table, that no stopword list above holds
FUNCTION_WORDS_BY_LANG: dict[str, frozenset[str]] = {
    "en": frozenset(
        """about above across after afterwards again against ago ahead along already also although always
        among another any anyone anything anyway around away back before behind below beside besides
        between beyond both down during each either else elsewhere enough even ever every everyone
        everything except few first following further furthermore hence here however inside instead last
        later less many meanwhile more moreover most much neither never nevertheless next none nor
        nothing off often once only onto other others otherwise out outside over own per perhaps please
        rather same several since some someone something sometimes soon still such thereby therefore
        though through throughout thus together too toward towards under unless unlike until up upon
        very via whatever whenever whereas whether while within without yet enabled disabled default
        see today tomorrow yesterday""".split()
    ),
    "fr": frozenset(
        """ainsi alors apres aussi autre autres avant beaucoup bien car cela cependant chaque chez ci
        comme depuis donc dont encore enfin ensuite entre hier ici jamais lorsque malgre meme moins non
        oui parce pendant peu plus plusieurs pourquoi pourtant puis quand sans selon sinon sous souvent
        tous tout toute toutes tres trop vers voici voila aujourd demain desormais deja""".split()
    ),
    "de": frozenset(
        """also andere anderen auch ausser bereits beim bitte da dabei daher damit danach dann darum
        dazu denn deshalb doch dort durch etwa etwas gegen gestern heute hier immer jede jedem jeden
        jeder jedes jedoch jetzt kein keine keinen mehr morgen nein nie nun ob oft ohne schon seit sehr
        sowie trotz wahrend weil weiter wieder zwischen""".split()
    ),
    "es": frozenset(
        """ahora algo alguien algun alguna algunas alguno algunos ante antes aqui asi aun aunque ayer bien
        cada casi desde despues durante entonces entre hacia hasta hoy luego manana mientras mismo mucho
        muchos nada nadie ni ninguno nunca otra otras otro otros pues segun si siempre solo tambien tampoco
        tan tanto toda todas todavia todo todos tras vez""".split()
    ),
    "zh": frozenset("但是 因此 所以 然而 而且 或者 如果 虽然 因为 另外 此外 然后 今天 明天 昨天 开启 关闭".split()),
}
CALENDAR = frozenset().union(*CALENDAR_BY_LANG.values())
CALENDAR_ABBR = frozenset().union(*CALENDAR_ABBR_BY_LANG.values())
ABBREVIATIONS = frozenset().union(*ABBREVIATIONS_BY_LANG.values())
FUNCTION_WORDS = frozenset().union(*FUNCTION_WORDS_BY_LANG.values())
