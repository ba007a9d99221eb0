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
