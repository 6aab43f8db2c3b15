"""Reading the project's man pages (roff source) in tests: test_doc_*.sh."""
import re


def roff_line(ln):
    """The text of one roff line: the font macros (.B .I .BI .BR .IB .IR .RB
    .RI) join their arguments as man does; other requests give nothing; the
    escapes for fonts, hyphens and the like go."""
    m = re.match(r"^\.(B|I|BI|BR|IB|IR|RB|RI)(?:\s+(.*))?$", ln)
    if m:
        args = re.findall(r'"([^"]*)"|(\S+)', m.group(2) or "")
        ln = "".join(a or b for a, b in args)
    elif ln.startswith("."):
        return ""
    ln = re.sub(r"\\f[BIRP]", "", ln)
    for a, b in (("\\-", "-"), ("\\&", ""), ("\\%", ""), ("\\c", ""), ("\\e", "\\")):
        ln = ln.replace(a, b)
    return re.sub(r"\\\(..", "", ln)


def sections(text):
    """{name: text} of the .SH sections of a page (the text begins with the
    line of the name)."""
    return {s.split("\n", 1)[0].strip().strip('"'): s
            for s in re.split(r"^\.SH ", text, flags=re.M)[1:]}
