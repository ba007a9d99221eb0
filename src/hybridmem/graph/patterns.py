"""The rule extractor's patterns: technical entities by shape (standards, identifiers, error
codes, hosts, services, config keys, ...), identifiers cut to their parts, relation triggers."""

from __future__ import annotations

import re

_SERVICE_SUFFIX = r"(?:service|svc|api|gateway|worker|workers|scheduler|proxy|server|db|queue|broker|cache|cluster|agent|manager|store|console)"
#: prefixes of standards and specification series, written with a number after a space, a hyphen
#: or nothing: ``RFC 9110``, ``ISO 8601-1:2019``, ``ISO-8601``, ``IEEE 802.11ax``, ``PEP 8``, ``RFC9110``
STANDARD_PREFIXES: tuple[str, ...] = (
    "RFC", "BCP", "ISO", "IEC", "ISO/IEC", "IEEE", "PEP", "PSR", "JSR", "SRFI", "XEP", "BIP", "EIP", "ERC",
    "ECMA", "ANSI", "NIST SP", "FIPS", "ETSI", "ITU-T", "DIN", "DIN EN", "NF EN", "BS EN", "UNE", "UNE-EN",
    "GB/T", "JIS",
)  # fmt: skip
_STANDARD = re.compile(
    r"(?<![\w/.-])(?:"
    + "|".join(re.escape(p) for p in sorted(STANDARD_PREFIXES, key=len, reverse=True))
    + r")[ \u00a0-]?\d+(?:[-.:]\d+)*[a-z]{0,3}(?!\w)"
)
#: multi-part identifiers, every part kept: ``CVE-2022-39253``, ``GHSA-4f8r-qqr9-fq8j``, ``DSA-5332-1``,
#: ``RHSA-2023:0001``, ``HEL-4040``, ``MS17-010`` (trailing words are cut by ``_identifier``)
_ID_PARTS = re.compile(r"(?<![\w.-])[A-Z][A-Z0-9]{1,9}-[A-Za-z0-9]{1,16}(?:[-:][A-Za-z0-9]{1,16}){0,6}(?!\w)")
#: capitals run into a number: ``KB5034441``, ``SHA256``
_ID_LETTERS_NUMBER = re.compile(r"(?<![\w.-])[A-Z]{2,8}\d{3,12}(?!\w)")
_ENTITY_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("http_status", re.compile(r"\bHTTP[\s-]?([1-5]\d\d)\b")),
    ("standard", _STANDARD),
    ("identifier", _ID_PARTS),
    ("error_code", re.compile(r"\b(?:E|ERR|ORA|SQLSTATE)[-_ ]?\d{3,5}\b")),
    ("identifier", _ID_LETTERS_NUMBER),
    ("cluster", re.compile(r"\b(?:cluster|Cluster|clúster|Clúster)[\s-]([A-Z0-9][\w-]{0,20})\b")),
    (
        "environment",
        re.compile(r"\b(?:production|staging|préproduction|preproduction|Produktion|producción|development)\b", re.I),
    ),
    ("host", re.compile(r"\b[a-z][a-z0-9-]*-(?:\d{2,3}|prd|stg|dev)(?:-\d{2,3})?(?:\.[a-z0-9-]+)*\b")),
    ("host", re.compile(r"\b[a-z0-9-]+(?:\.[a-z0-9-]+)+\.(?:internal|local|lan|corp|com|net|io|org|fr|de)\b")),
    ("service", re.compile(rf"\b[a-z][a-z0-9]*(?:-[a-z0-9]+)*-{_SERVICE_SUFFIX}\b")),
    ("path", re.compile(r"(?<![\w/])(?:~|\.)?/[\w.-]+(?:/[\w.*<>-]+)+/?")),
    ("version", re.compile(r"\bv\d+(?:\.\d+){1,3}\b")),
    ("function", re.compile(r"\b[A-Za-z_][\w.]*\w\(\)")),
    ("config", re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")),
    ("config", re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")),
    ("config", re.compile(r"\b[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*){1,4}\b(?!\()")),
]
_SQL_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)?)")
_BACKTICK = re.compile(r"`([^`\n]{2,60})`")
# capitalised names (people, products, places) for prose: "Kevin Scott", "Ebenezer Scrooge"
_NAME = re.compile(
    r"\b[A-Z][\w'’]*[a-z][\w'’]*(?:(?:\s+(?:of|de|du|des|la|le|von|van|der|del|y)\s+|\s+)[A-Z][\w'’]*[a-z][\w'’]*){0,3}\b"
)
_CJK_TERM = re.compile(r"[A-Za-z][\w-]*[A-Za-z0-9]")
_SENT = re.compile(r"(?<=[.!?。！？;；])\s+|\n{2,}|\n(?=\s*(?:[-*#>|]|\d+\.))")
_FILE_EXT = re.compile(r"\.(?:ya?ml|json|md|py|sh|txt|toml|conf|cfg|log|csv|ini|xml|html?)$", re.I)
_DOMAIN_TLD = re.compile(r"\.(?:com|net|org|io)$")

#: (relation type, pattern): the relation goes from the nearest entity before the trigger to the
#: nearest entity after it; patterns are folded (lower case, no accents) like the text they scan
RELATION_PATTERNS: list[tuple[str, str]] = [
    # en
    ("depends_on", r"depends? on|relies on|requires"),
    ("calls", r"calls|invokes|sends requests to|queries"),
    ("causes", r"causes|triggers|leads to|results in|returns"),
    ("uses", r"uses|reads from|writes to|connects to|is backed by"),
    ("part_of", r"is part of|runs on|is hosted on|belongs to"),
    # fr
    ("depends_on", r"depend de|depend du|depend des|depend d|necessite|requiert"),
    ("calls", r"appelle|interroge|envoie des requetes a"),
    ("causes", r"provoque|cause|entraine|declenche|renvoie|retourne"),
    ("uses", r"utilise|lit dans|ecrit dans|se connecte a|s'appuie sur|s’appuie sur"),
    ("part_of", r"fait partie de|tourne sur|est heberge sur|heberge sur"),
    # de
    ("depends_on", r"hangt von|hangt ab von|ist abhangig von|benotigt|erfordert"),
    ("calls", r"ruft|aufrufen|fragt"),
    ("causes", r"verursacht|fuhrt zu|lost aus|liefert"),
    ("uses", r"verwendet|nutzt|benutzt|schreibt in|liest aus|verbindet sich mit"),
    ("part_of", r"lauft auf|ist teil von|gehort zu"),
    # es
    ("depends_on", r"depende de|depende del|requiere|necesita"),
    ("calls", r"llama a|invoca|consulta"),
    ("causes", r"provoca|causa|genera|desencadena|devuelve"),
    ("uses", r"usa|utiliza|escribe en|lee de|se conecta a"),
    ("part_of", r"forma parte de|se ejecuta en|corre en"),
    # zh (no word boundaries)
    ("depends_on", r"依赖于|依赖|取决于"),
    ("calls", r"调用|请求"),
    ("causes", r"导致|引起|触发|返回"),
    ("uses", r"使用|读取|写入|连接到"),
    ("part_of", r"运行在|属于|部署在"),
]
_REL_RE = [
    (t, re.compile(p if re.search(r"[\u4e00-\u9fff]", p) else rf"(?<![\w-])(?:{p})(?![\w-])"))
    for t, p in RELATION_PATTERNS
]


def _type_of_code(span: str) -> str:
    """Type of a backticked code span, by its shape."""
    for typ, pat in _ENTITY_PATTERNS:
        m = pat.fullmatch(span)
        if m:
            if typ == "identifier":
                ident = _identifier(span)
                if ident is None or ident[0] != span:
                    continue
                typ = ident[1]
            return typ
    if " " in span.strip():
        return "command"
    return "term"


def _identifier(surface: str) -> tuple[str, str] | None:
    """An identifier match with every part kept, and its type: ``standard`` (a standard's prefix),
    ``error_code`` (two parts: ``HEL-4040``, ``ORA-00942``) or ``identifier`` (more parts, or capitals
    run into a number). Trailing words are cut (``UTF-8-encoded``: ``UTF-8``); the parts after the
    prefix need two digits (``UTF-8`` is no identifier), unless they look like a hash
    (``GHSA-xxxx-xxxx-xxxx``: three or more parts of one length). None when nothing is left."""
    if _STANDARD.fullmatch(surface):
        return surface, "standard"
    parts = re.split(r"[-:]", surface)
    if len(parts) == 1:
        return (surface, "identifier") if _ID_LETTERS_NUMBER.fullmatch(surface) else None
    prefix, tail = parts[0], parts[1:]
    hashlike = len(tail) >= 3 and len({len(p) for p in tail}) == 1 and len(tail[0]) >= 3
    if not hashlike:
        while tail and tail[-1].isalpha():
            tail.pop()
    if not tail or (not hashlike and sum(c.isdigit() for p in tail for c in p) < 2):
        return None
    surface = surface[: len(prefix) + sum(len(p) + 1 for p in tail)]
    if prefix in STANDARD_PREFIXES:
        return surface, "standard"
    return surface, "error_code" if len(tail) == 1 else "identifier"
