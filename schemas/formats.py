"""String `format`s we can enforce exactly, as whole-string regexes for `regex.full_language`.

Each grammar is a subset of both the RFC the format names and what `jsonschema`'s `FormatChecker`
accepts, so a generated string is valid however it is checked: `date` is RFC 3339 full-date with
real calendar days (leap years included, year 0000 excluded because Python's `date` rejects it),
`time` is RFC 3339 full-time without leap seconds and with upper-case `Z`, `date-time` joins them
with `T`, `uuid` is the 8-4-4-4-12 hex form, `ipv4` is dotted-quad without leading zeros,
`email` is an RFC 5322 dot-atom local part `@` a domain of two or more LDH labels, at most 254
characters in all (the per-part limits of RFC 5321, 64 for the local part and 63 per label, are
not encoded: they would multiply the automaton by the count; see docs/schemas.md), and
`duration` is RFC 3339 Appendix A's ISO 8601 duration ("P3W", "P1Y2M", "PT1H30M": what Pydantic
writes for a `timedelta` field and reads back), and `uri` is an http or https address (`URI`
below: what Pydantic's `AnyUrl` and `HttpUrl` read back). Other formats
are refused.
"""

from __future__ import annotations

_YEAR = "(000[1-9]|00[1-9][0-9]|0[1-9][0-9][0-9]|[1-9][0-9][0-9][0-9])"
_LEAP = "([0-9][0-9](0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
_MONTH_DAY = (
    "((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])"
    "|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
    "|02-(0[1-9]|1[0-9]|2[0-8]))"
)
DATE = f"({_YEAR}-{_MONTH_DAY}|{_LEAP}-02-29)"
_HOUR = "([01][0-9]|2[0-3])"
_MIN = "[0-5][0-9]"
TIME = f"{_HOUR}:{_MIN}:{_MIN}(\\.[0-9]+)?(Z|[+-]{_HOUR}:{_MIN})"
_HEX = "[0-9a-fA-F]"
_ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_LABEL = "[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
_OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"

# RFC 3339 Appendix A: ISO 8601 durations, "P3W", "P1Y2M", "P45D", "PT1H30M", "P1DT12H", with
# at most six digits a component (Pydantic refuses "a numeric value in the duration is too
# large" beyond its limits; a million days is 2,700 years).
_N = "[0-9]{1,6}"
_SECOND = f"{_N}S"
_MINUTE = f"{_N}M({_SECOND})?"
_DUR_TIME = f"T({_N}H({_MINUTE})?|{_MINUTE}|{_SECOND})"
_DUR_DATE = f"({_N}D|{_N}M({_N}D)?|{_N}Y({_N}M({_N}D)?)?)"
DURATION = f"P({_DUR_DATE}({_DUR_TIME})?|{_DUR_TIME}|{_N}W)"

# RFC 3986 URIs as web addresses: http or https, a host name whose last label starts with a
# letter, an optional port up to 59999, then path, query and fragment of RFC 3986 characters
# (percent-escapes included). A subset that Pydantic's `AnyUrl` and `HttpUrl` (both `format:
# uri`) read back; other schemes (`mailto:`, `urn:`) and IP-address hosts are left out.
_PCHAR = "([A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})"
_HOST = f"({_LABEL}\\.)*[A-Za-z]([A-Za-z0-9-]*[A-Za-z0-9])?"
_PORT = "(:([1-9][0-9]{0,3}|[1-5][0-9]{4}))?"
URI = f"https?://{_HOST}{_PORT}(/{_PCHAR}*)*(\\?({_PCHAR}|[/?])*)?(#({_PCHAR}|[/?])*)?"

FORMATS: dict[str, tuple[str, int | None]] = {
    # name: (regex, maximum length in code points or None)
    "date": (DATE, None),
    "time": (TIME, None),
    "date-time": (f"{DATE}T{TIME}", None),
    "uuid": (f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}", None),
    "ipv4": (f"{_OCTET}\\.{_OCTET}\\.{_OCTET}\\.{_OCTET}", None),
    "email": (f"{_ATEXT}+(\\.{_ATEXT}+)*@{_LABEL}(\\.{_LABEL})+", 254),
    "duration": (DURATION, None),
    "uri": (URI, None),
}
