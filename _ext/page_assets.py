"""Sphinx extension for the book: what every built page loads, served offline and kept light.

* Copies the part of MathJax 3 the book uses (shipped on PyPI by ``django-static-mathjax``
  as the ``mathjax`` package) into ``_static/mathjax``, so ``mathjax_path`` in
  ``_config.yml`` points at a local file and the built book typesets maths with no
  network: the components every page loads (the loader, core, TeX input, CHTML output and
  its font data, lazy typesetting, assistive MathML), the TeX extensions they may autoload,
  the CHTML fonts, and what is loaded on demand: the contextual menu
  (``_static/math-menu.js`` loads it on a reader's first right-click or Space on a formula)
  and what the menu loads (accessibility, the MathML input its explorer needs, English speech
  rules). The combined bundles, SVG output and speech rules of other languages (about 20 MB) stay out.
  A missing MathJax fails the build at start-up, not after a long build.
* Replaces pydata-sphinx-theme's ``fontawesome.js`` (1.5 MB on every page, there "so
  that users can add custom icons") by an empty script: the book adds none, and the
  theme's CSS already draws every icon with Font Awesome's web fonts. Source maps
  (``*.map``, for debugging the themes' scripts) and the theme's message catalogues
  (``_static/locales``, read only while building) are left out of the build too.
* Loads ``_static/book-nav.js`` deferred: Jupyter Book adds every file of ``_static/``
  (``book.css`` too) as a plain script, and that one must run after the page is parsed
  but before the theme's own deferred scripts (sidebar toggles at every width).
* Drops sphinx-thebe's scripts and style sheet, which Jupyter Book always adds: the book
  launches Binder instead, and those scripts name a CDN and are registered twice per page
  (a console error in every browser).

After the build, what a reader's first visit to a page fetches is trimmed
(``benchmarks/site_weight.py`` measures it; ``tests/book/test_site_weight.py`` checks each step):

* **Search index on first use.** pydata-sphinx-theme puts Sphinx's search index
  (``searchindex.js``, 200 KB and growing with the book) and its search scripts on every
  page, for a search-as-you-type box the book does not turn on: its search box sends the
  query to ``search.html``, which loads them itself. They are removed from every other page.
* **Icon fonts cut to the icons the book shows.** Font Awesome's fonts (solid 156 KB and
  brands 118 KB as WOFF2) are subset with fontTools to the glyphs the book uses: every
  ``fa-*`` icon class named in a built page or script, and every private-use character a
  style sheet draws outside those icon classes (the theme's admonition and link icons). They
  are written as WOFF (zlib: the venv has no Brotli for WOFF2), the ``@font-face`` rules now
  point at them, and the CSS rules of the other ~1,900 icons go too.
* **Minified style sheets.** Every style sheet in ``_static`` (not MathJax's) loses its
  comments (not the ``/*!`` licence notices) and the whitespace that no selector or value
  needs: tokens are re-serialised with tinycss2 exactly as parsed, whitespace runs become
  one space and vanish only next to ``{ } ; ,``. (The theme's 397 KB sheet was already
  minified by its build; the gain is in the others.)
* **Style rules nothing can match dropped** from the third-party style sheets (``PURGED_SHEETS``;
  the book's own are left as written): a rule goes when each of its selectors names a class or
  id that no page has in a ``class``/``id`` attribute or an inline script, and no script of
  ``_static`` has anywhere (the theme's and Bootstrap's scripts add ``show``, ``collapsing``,
  ``fade``, tooltips, the search dialog's classes at run time; every word of a script counts,
  in a string or not, and a word ending in ``-`` keeps every name it begins; of Bootstrap's bundle only
  the classes its dropdown and tooltip add, :data:`BOOTSTRAP_RUNTIME_CLASSES`: its other components,
  modals to carousels, are on no page). Attribute
  selectors (``html[data-theme=dark]``), pseudo-classes and what ``:not()``/``:is()``/
  ``:where()``/``:has()`` hold never drop a rule. The theme's 311 KB sheet keeps 92 KB (92,370 B).
* **Code tokens drawn as plain text lose their spans**: in Python code blocks, a Pygments token
  class whose only declaration, in every colour theme, is the colour that theme gives the code
  block (``n`` names, ``p`` punctuation, ``w`` spaces, ``nn`` module names today) is dropped,
  ``<span class="n">x</span>`` becoming ``x`` (a sixth of a code-heavy page), and a rule added
  to ``pygments.css`` gives those blocks' ``pre`` that colour (the theme's ``pre`` colour would
  win otherwise; the Python lexer leaves only whitespace outside token spans), so the code draws
  the same pixels. Copying (which reads the text) is unchanged.
* **No sphinx-design where it is unused**: its style sheet and script (62 KB) are removed from
  the pages that hold none of its components (``sd-`` classes): today, all of them.
* **Images below the fold load lazily**: every ``<img>`` with a file ``src`` gets
  ``loading="lazy"`` (Chromium still fetches the ones within about a screen of the window).
* **Bootstrap on first use**: the theme's ``scripts/bootstrap.js`` (81 KB: the header's menus and
  tooltips, the back-to-top button) is held as ``<script type="text/plain" data-book-on-use>``
  (never fetched as such) and its preload link dropped; ``_static/bootstrap-on-use.js`` fetches it
  when the pointer or focus reaches one of its controls, a menu is clicked or the reader scrolls.
"""
import re
import shutil
from pathlib import Path


def _mathjax_dir() -> Path:
    import mathjax  # the django-static-mathjax distribution

    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (source / "startup.js").is_file():
        raise RuntimeError(f"MathJax's es5 build was not found at {source}; reinstall django-static-mathjax")
    return source


NAV_SCRIPT = "book-nav.js"

# Paths inside MathJax's es5 folder that the book requests, or that the MathJax menu may request.
MATHJAX_FILES = (
    "startup.js",  # mathjax_path: the loader, which loads the components below (_config.yml)
    "core.js",
    "input/tex.js",  # TeX with the base, ams, newcommand, require, autoload, configmacros packages
    "input/mml.js",  # MathML input: a11y/explorer (the menu's Accessibility > Activate) loads it on every page
    "output/chtml.js",
    "output/chtml/fonts/tex.js",  # the TeX fonts' metrics, loaded by output/chtml
    "input/tex/extensions",  # autoloaded by TeX macros that are not in the bundle
    "output/chtml/fonts/woff-v2",  # the CHTML fonts
    "ui",  # ui/lazy (every page), ui/menu (on first use)
    "a11y",  # a11y/assistive-mml (every page), the menu's accessibility options
    "sre/mathmaps/base.json",  # speech rules that the explorer loads: common part,
    "sre/mathmaps/en.json",  # English
    "sre/mathmaps/nemeth.json",  # and Nemeth braille
)


def _copy_mathjax(app, exception):
    if exception is None and app.builder.format == "html":
        source, target = _mathjax_dir(), Path(app.outdir) / "_static" / "mathjax"
        for name in MATHJAX_FILES:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            if (source / name).is_dir():
                shutil.copytree(source / name, target / name, dirs_exist_ok=True)
            else:
                shutil.copy2(source / name, target / name)


def _lighten_theme(app, exception):
    if exception is None and app.builder.format == "html":
        static = Path(app.outdir) / "_static"
        (static / "scripts" / "fontawesome.js").write_text(
            "/* Empty: the book's icons come from the theme's CSS web fonts (_ext/page_assets.py). */\n"
        )
        for source_map in static.rglob("*.map"):
            source_map.unlink()
        # sphinx-book-theme's message catalogues: Sphinx reads them while building, a browser never does.
        shutil.rmtree(static / "locales", ignore_errors=True)


def _defer_nav_script(app, config):
    config.html_js_files = [
        (NAV_SCRIPT, {"defer": "defer"}) if entry == NAV_SCRIPT else entry for entry in config.html_js_files
    ]


def _is_thebe(script) -> bool:
    return "thebe" in (script.filename or "") or "THEBE_JS_URL" in script.attributes.get("body", "")


def _drop_thebe(app, pagename, templatename, context, doctree):
    context["script_files"] = [js for js in context.get("script_files", []) if not _is_thebe(js)]
    context["css_files"] = [css for css in context.get("css_files", []) if "thebe" not in (css.filename or "")]


# ---- after the build: trim what every page loads -------------------------------------------------

# The three tags pydata-sphinx-theme's layout.html puts in every page but search.html (its extrahead block).
_SEARCH_TAGS = re.compile(
    r'[ \t]*<script src="(?:\.\./)*(?:_static/searchtools\.js|_static/language_data\.js|searchindex\.js)(?:\?[^"]*)?">'
    r'</script>\n?')
_IMG = re.compile(r"<img\b[^>]*>")
# sphinx-design's style sheet and script, which it links from every page.
_SPHINX_DESIGN_TAGS = re.compile(r'[ \t]*<(?:link [^>]*href="[^"]*sphinx-design\.min\.css[^"]*"[^>]*|'
                                 r'script [^>]*src="[^"]*design-tabs\.js[^"]*"[^>]*>\s*</script)>\n?')


# The theme's Bootstrap bundle: its preload link and its deferred script (pydata-sphinx-theme's layout).
_BOOTSTRAP_PRELOAD = re.compile(r'[ \t]*<link rel="preload" as="script" href="[^"]*/scripts/bootstrap\.js(?:\?[^"]*)?" ?/>\n?')
_BOOTSTRAP_SCRIPT = re.compile(r'<script defer src="([^"]*/scripts/bootstrap\.js(?:\?[^"]*)?)"></script>')
BOOTSTRAP_LOADER = "bootstrap-on-use.js"


def hold_bootstrap(html: str) -> str:
    """The page with Bootstrap held for ``_static/bootstrap-on-use.js`` to load on first use: its script
    made inert (``type="text/plain"``, ``data-book-on-use``, the same address), its preload link gone.
    A page without the loader keeps Bootstrap as it was."""
    if BOOTSTRAP_LOADER not in html:
        return html
    html = _BOOTSTRAP_PRELOAD.sub("", html)
    return _BOOTSTRAP_SCRIPT.sub(r'<script type="text/plain" data-book-on-use src="\1"></script>', html)


def uses_sphinx_design(html: str) -> bool:
    """Whether a page holds any of sphinx-design's components (their classes start with ``sd-``)."""
    return re.search(r'class="(?:[^"]* )?sd-', html) is not None


def _pages(outdir: Path):
    """The built HTML pages (not the theme's templates copied into _static, nor the sources)."""
    for page in outdir.rglob("*.html"):
        if page.relative_to(outdir).parts[0] not in ("_static", "_sources", "_images"):
            yield page


def _lazy_image(tag: str) -> str:
    if "loading=" in tag or re.search(r'\bsrc="data:', tag):
        return tag  # an image inside the page's own bytes has nothing to fetch
    return tag[:4] + ' loading="lazy"' + tag[4:]


# Python code blocks: their lexer puts every character but whitespace in a token span.
PLAIN_CODE_LEXERS = ("ipython3", "python", "python3")
_HIGHLIGHT_BLOCK = re.compile(r'<div class="highlight-(?:%s) notranslate"><div class="highlight"><pre>.*?</pre>'
                              % "|".join(PLAIN_CODE_LEXERS), re.S)


def unwrap_plain_tokens(html: str, plain: frozenset = frozenset()) -> str:
    """Python code blocks without the spans of the token classes ``plain`` (see :func:`plain_token_classes`):
    their text is then coloured by the block's ``pre`` (:func:`plain_code_rules`)."""
    if not plain:
        return html
    span = re.compile(r'<span class="(?:%s)">([^<]*)</span>' % "|".join(map(re.escape, sorted(plain))))
    return _HIGHLIGHT_BLOCK.sub(lambda block: span.sub(r"\1", block.group(0)), html)


def lighten_page(html: str, search_page: bool = False, plain_tokens: frozenset = frozenset()) -> str:
    """One page as the book serves it: no search index unless it is the search page, no sphinx-design
    assets unless it uses them, lazy images, no spans for code tokens drawn as plain text, Bootstrap
    loaded on first use."""
    html = hold_bootstrap(unwrap_plain_tokens(html, plain_tokens))
    if not search_page:
        html = _SEARCH_TAGS.sub("", html)
    if not uses_sphinx_design(html):
        html = _SPHINX_DESIGN_TAGS.sub("", html)
    return _IMG.sub(lambda match: _lazy_image(match.group(0)), html)


_TIGHT = {",", ";", "{", "}"}  # no whitespace is needed on either side of these


def _holds_var(node) -> bool:
    """Whether ``node`` is a ``var()`` function or a function or bracket with one inside."""
    if node.type == "function" and node.lower_name == "var":
        return True
    children = node.arguments if node.type == "function" else getattr(node, "content", None) or []
    return any(_holds_var(child) for child in children if hasattr(child, "type"))


def _serialise(nodes, exact_spaces: bool = False) -> list[str]:
    """Tokens back to text, whitespace runs as one space, dropped next to ``{ } ; ,`` — except inside
    ``var()`` and custom property values, whose text browsers keep as written (``exact_spaces``)."""
    import tinycss2

    out: list[str] = []
    space = comment = False
    custom = False  # inside a custom property's value (``--name: …;``), up to its semicolon
    for node in nodes:
        if node.type == "whitespace":
            if exact_spaces or (custom and out[-1] != ":"):
                out.append(node.value)  # kept as written: browsers keep these values' text
            else:
                space = True
            continue
        if node.type == "comment":
            comment = True
            continue
        if node.type == "error":
            raise ValueError(f"CSS parse error at line {node.source_line}: {node.message}")
        keep = exact_spaces or custom
        if node.type == "string":
            text = node.representation  # tinycss2 writes the characters themselves (pages are UTF-8)
        elif node.type in ("() block", "[] block", "{} block", "function"):
            opening = {"() block": "(", "[] block": "[", "{} block": "{"}.get(node.type)
            if opening is None:
                opening = tinycss2.serializer.serialize_identifier(node.name) + "("
            closing = {"(": ")", "[": "]", "{": "}"}[opening[-1]]
            # A value with var() is kept as written by browsers, so every function or bracket around
            # a var() keeps its spaces too (`min(calc(var(--x) + 2), 60%)`, comma's space included).
            inner_exact = keep and node.type != "{} block" or (node.type != "{} block" and _holds_var(node))
            text = opening + "".join(_serialise(node.arguments if node.type == "function" else node.content,
                                                inner_exact)) + closing
        else:
            text = node.serialize()
        tight = out and (out[-1][-1:] in _TIGHT or text[:1] in _TIGHT)
        if space and out and (not tight or (keep and text != ";" and out[-1] != ":")):
            out.append(" ")
        elif comment and not space and out:
            out.append("/**/")  # a comment between two tokens keeps them apart, as the original did
        out.append(text)
        if node.type == "literal" and node.value == ";":
            custom = False
        elif node.type == "literal" and node.value == ":" and len(out) >= 2 and out[-2].startswith("--"):
            custom = True
        space = comment = False
    return out


def minify_css(text: str) -> str:
    """The style sheet without comments (licence notices ``/*! … */`` kept) and needless whitespace.

    Only whitespace and comments change: every other token is written back as tinycss2 parsed it,
    a run of whitespace (or a comment) becomes one space, and that space is dropped only next to
    ``{``, ``}``, ``;`` or ``,`` (not inside ``var()`` or a custom property's value, which browsers
    keep as written). A string's escaped characters are written as characters: every page is UTF-8,
    the encoding a style sheet without ``@charset`` inherits.
    """
    import tinycss2

    nodes = tinycss2.parse_component_value_list(text, skip_comments=False)
    if any(node.type == "error" for node in nodes):
        raise ValueError("CSS parse error: " + next(n.message for n in nodes if n.type == "error"))
    notices = [node for node in nodes if node.type == "comment" and node.value.startswith("!")]
    head = "".join(f"/*{node.value}*/\n" for node in notices)
    return head + "".join(_serialise([node for node in nodes if node not in notices])) + "\n"


# A whole rule (it starts the sheet or follows another rule's brace) whose every selector is an icon's.
_ICON_RULE = re.compile(r'(?:(?<=[{}])|^)((?:\.fa-[a-z0-9-]+::?(?:before|after),?)+)\{content:("(?:[^"\\]|\\.)*")\}')
_PRIVATE_USE = re.compile(r"[\ue000-\uf8ff\U000f0000-\U000ffffd]")


def _string_chars(css_string: str) -> str:
    import tinycss2

    (token,) = tinycss2.parse_component_value_list(css_string)
    return token.value


def _strings(nodes):
    """Every string token's value in a tinycss2 node list, at any depth."""
    for node in nodes:
        if node.type == "string":
            yield node.value
        for child in (getattr(node, "content", None), getattr(node, "arguments", None)):
            if isinstance(child, list):
                yield from _strings(child)


def trim_icon_rules(css: str, used: set[str]) -> tuple[str, set[int]]:
    """Drop Font Awesome's ``.fa-NAME:before{content:…}`` rules whose names are all unused.

    Works on minified CSS (as the theme ships it). Returns the CSS and the code points the kept
    icon rules draw.
    """
    kept: set[int] = set()

    def keep_or_drop(match):
        names = set(re.findall(r"\.fa-([a-z0-9-]+)", match.group(1)))
        if names & used:
            kept.update(ord(c) for c in _string_chars(match.group(2)))
            return match.group(0)
        return ""

    return _ICON_RULE.sub(keep_or_drop, css), kept


# ---- style rules no page can match, code tokens drawn as plain text -------------------------------------

# The third-party style sheets that are purged (paths under _static, shell patterns); the book's own are not.
PURGED_SHEETS = ("styles/pydata-sphinx-theme.css", "styles/sphinx-book-theme.css", "basic.css", "pygments.css",
                 "togglebutton.css", "copybutton.css", "mystnb.*.css", "sphinx-design.min.css", "sphinx-thebe.css")
_WORD = re.compile(r"-?[A-Za-z_][A-Za-z0-9_-]*")
_INLINE_SCRIPT = re.compile(r"<script\b[^>]*>(.*?)</script>", re.S)


def script_words(js: str) -> set[str]:
    """Every class- or id-like word of a script, in its strings or not: telling a minified script's strings
    from its regular expressions takes a parser, and a word too many only keeps a rule."""
    return set(_WORD.findall(js))


def page_words(html: str) -> set[str]:
    """The classes and ids a page names: its ``class`` and ``id`` attributes, and its inline scripts' strings."""
    words = {word for value in re.findall(r'\b(?:class|id)="([^"]*)"', html) for word in value.split()}
    for script in _INLINE_SCRIPT.findall(html):
        words |= script_words(script)
    return words


def selector_names(selector: str) -> list[str]:
    """The classes and ids an element must have to match ``selector`` (one complex selector, no commas at
    its top level): attribute selectors and what functional pseudo-classes hold are left out."""
    text = re.sub(r'\[(?:[^\]"\']|"[^"]*"|\'[^\']*\')*\]', "", selector)
    while True:  # innermost functional pseudo-classes first: :not(.a), :is(.b, .c), :where(), :has()
        lighter = re.sub(r":[A-Za-z-]+\([^()]*\)", "", text)
        if lighter == text:
            break
        text = lighter
    return re.findall(r"[.#](-?[A-Za-z_][A-Za-z0-9_-]*)", text)


def _split_selectors(prelude: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(prelude):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(prelude[start:i])
            start = i + 1
    return parts + [prelude[start:]]


def can_match(prelude: str, words: set[str]) -> bool:
    """Whether some selector of a rule names only classes and ids in ``words`` (or one that a word
    ending in ``-`` begins); a selector with an escape is always kept."""
    prefixes = tuple(word for word in words if word.endswith("-"))
    for selector in _split_selectors(prelude):
        if "\\" in selector or all(name in words or name.startswith(prefixes) for name in selector_names(selector)):
            return True
    return False


def purge_css(css: str, words: set[str]) -> str:
    """``css`` without the style rules that :func:`can_match` says nothing matches (inside ``@media``,
    ``@supports``, ``@container`` and ``@layer`` blocks too; a block left empty goes as well)."""
    import tinycss2

    def purge(rules) -> str:
        out = []
        for rule in rules:
            if rule.type == "qualified-rule":
                if can_match(tinycss2.serialize(rule.prelude), words):
                    out.append(rule.serialize())
            elif rule.type == "at-rule" and rule.content is not None and rule.lower_at_keyword in (
                    "media", "supports", "container", "layer"):
                inner = purge(tinycss2.parse_rule_list(rule.content, skip_comments=True, skip_whitespace=True))
                if inner:
                    out.append(f"@{rule.at_keyword}{tinycss2.serialize(rule.prelude)}{{{inner}}}")
            elif rule.type == "error":
                raise ValueError(f"CSS parse error at line {rule.source_line}: {rule.message}")
            else:
                out.append(rule.serialize())
        return "".join(out)

    return purge(tinycss2.parse_stylesheet(css, skip_comments=False, skip_whitespace=True))


def plain_token_classes(pygments_css: str, other_sheets: tuple = ()) -> frozenset:
    """Pygments token classes that draw as the code around them: in every colour theme of ``pygments_css``
    their one declaration is the ``color`` that theme gives ``.highlight``, and no other sheet names them."""
    themes = _pygments_themes(pygments_css)
    if not themes:
        return frozenset()
    names = set.union(*(set(theme) - {""} for theme in themes.values()))
    plain = {name for name in names
             if all(set(theme.get(name, {})) == {"color"} and "color" in theme.get("", {})
                    and theme[name]["color"] == theme[""]["color"] for theme in themes.values())}
    return frozenset(name for name in plain if not any(_names_alone(sheet, name) for sheet in other_sheets))


def plain_code_rules(pygments_css: str) -> str:
    """Rules giving the ``pre`` of a Python code block the colour its theme gives ``.highlight`` (the
    theme's own ``pre`` colour would win otherwise), so the text of an unwrapped plain token keeps the
    colour its span gave it. Besides those tokens the ``pre`` holds only whitespace."""
    rules = []
    for selector, theme in sorted(_pygments_themes(pygments_css).items()):
        if "color" in theme.get("", {}):
            where = ",".join(f"{selector} .highlight-{lexer} .highlight pre".strip() for lexer in PLAIN_CODE_LEXERS)
            rules.append(f"{where}{{color:{theme['']['color']}}}")
    return "".join(rules)


def _pygments_themes(pygments_css: str) -> dict:
    """Per theme selector (``html[data-theme="light"]``): ``""`` -> the declarations of ``.highlight``,
    a token class -> those of ``.highlight .class``."""
    import tinycss2

    themes: dict = {}
    for rule in tinycss2.parse_stylesheet(pygments_css, skip_comments=True, skip_whitespace=True):
        if rule.type != "qualified-rule":
            continue
        declarations = {d.lower_name: tinycss2.serialize(d.value).strip().lower()
                        for d in tinycss2.parse_declaration_list(rule.content, skip_comments=True, skip_whitespace=True)
                        if d.type == "declaration"}
        for selector in _split_selectors(tinycss2.serialize(rule.prelude)):
            match = re.fullmatch(r"\s*(.*?)\s*\.highlight(?:\s+\.([A-Za-z0-9_-]+))?\s*", selector)
            if match is None:
                continue
            theme = themes.setdefault(match.group(1), {})
            theme.setdefault(match.group(2) or "", {}).update(declarations)
    return themes


def _names_alone(css: str, name: str) -> bool:
    """Whether a selector of ``css`` could match an element whose only class is ``name``: a compound
    selector with ``.name`` and no other class or id (``.sig-param.n`` cannot match a code token's span)."""
    for compound in re.findall(r"[^\s>+~,{}()]*\.%s(?![\w-])[^\s>+~,{}()]*" % re.escape(name), css):
        if not [part for part in re.findall(r"[.#][\w-]+", compound) if part != "." + name]:
            return True
    return False


def _used_icon_names(outdir: Path) -> set[str]:
    texts = [page.read_text(encoding="utf-8") for page in _pages(outdir)]
    texts += [js.read_text(encoding="utf-8") for js in (outdir / "_static").rglob("*.js")
              if "mathjax" not in js.relative_to(outdir).parts]
    return {name for text in texts for name in re.findall(r"\bfa-([a-z0-9-]+)", text)}


FONT_AWESOME = "vendor/fontawesome/webfonts"
ICON_FONTS = ("fa-solid-900", "fa-regular-400", "fa-brands-400")


def theme_fonts() -> Path:
    """Font Awesome's fonts as pydata-sphinx-theme ships them."""
    import pydata_sphinx_theme

    folder = Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "static" / FONT_AWESOME
    if not folder.is_dir():
        raise RuntimeError(f"pydata-sphinx-theme's Font Awesome fonts are not at {folder}: update _ext/page_assets.py")
    return folder


def subset_font(source: Path, target: Path, codepoints: set[int]) -> None:
    """Write the glyphs of ``codepoints`` that ``source`` has to ``target`` (WOFF, zlib)."""
    from fontTools import subset

    options = subset.Options()
    options.flavor = "woff"
    options.layout_features = ["*"]
    options.name_IDs = ["*"]  # keep the licence and names
    options.notdef_outline = True
    font = subset.load_font(str(source), options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(codepoints))
    subsetter.subset(font)
    subset.save_font(font, str(target), options)


def _pristine_sheets(static: Path, sheets: list[Path], store: Path) -> None:
    """Put back the sheets as their packages ship them, where Sphinx left the trimmed copy of an earlier
    build in place (it does not copy the theme's files again): trimming must start from the whole sheet,
    or a class a page has begun to use since would stay purged. ``store`` keeps each sheet as shipped
    (``pristine``) and as last written (``written``); a sheet that differs from what was written is new."""
    for sheet in sheets:
        name = sheet.relative_to(static)
        pristine, written = store / "pristine" / name, store / "written" / name
        if written.is_file() and pristine.is_file() and sheet.read_bytes() == written.read_bytes():
            sheet.write_bytes(pristine.read_bytes())
        else:
            pristine.parent.mkdir(parents=True, exist_ok=True)
            pristine.write_bytes(sheet.read_bytes())


def _trim_icons_and_styles(outdir: Path) -> None:
    import tinycss2

    static = outdir / "_static"
    store = outdir.parent / ".page_assets"  # _build/.page_assets, beside the HTML
    trimmed = sorted(set(_purged_sheets(static)) | {static / "styles" / "pydata-sphinx-theme.css"})
    _pristine_sheets(static, trimmed, store)
    theme_css = static / "styles" / "pydata-sphinx-theme.css"
    css = theme_css.read_text(encoding="utf-8")
    css, icon_points = trim_icon_rules(css, _used_icon_names(outdir))
    drawn = set(icon_points)
    for sheet in static.rglob("*.css"):  # private-use characters drawn by other rules (admonition icons, ...)
        if "mathjax" not in sheet.relative_to(static).parts:
            text = _ICON_RULE.sub("", css if sheet == theme_css else sheet.read_text(encoding="utf-8"))
            drawn.update(ord(c) for value in _strings(tinycss2.parse_component_value_list(text))
                         for c in value if _PRIVATE_USE.match(c))
    fonts = static / FONT_AWESOME
    for name in ICON_FONTS:
        # From the theme's own copy (it ships each font as WOFF2 and TTF, the same glyphs), so that
        # trimming a build twice starts from the full font both times.
        subset_font(theme_fonts() / f"{name}.ttf", fonts / f"{name}.woff", drawn)
        for original in (f"{name}.ttf", f"{name}.woff2"):
            (fonts / original).unlink(missing_ok=True)
        old_src = (f'url(../{FONT_AWESOME}/{name}.woff2) format("woff2"),'
                   f'url(../{FONT_AWESOME}/{name}.ttf) format("truetype")')
        new_src = f'url(../{FONT_AWESOME}/{name}.woff) format("woff")'
        if old_src not in css and new_src not in css:
            raise RuntimeError(f"pydata-sphinx-theme.css no longer loads {name} as {old_src}: update _ext/page_assets.py")
        css = css.replace(old_src, new_src)
    theme_css.write_text(css, encoding="utf-8")
    words = build_words(outdir)
    for sheet in _purged_sheets(static):
        sheet.write_text(purge_css(sheet.read_text(encoding="utf-8"), words), encoding="utf-8")
    for sheet in static.rglob("*.css"):
        if "mathjax" not in sheet.relative_to(static).parts:
            sheet.write_text(minify_css(_unminified(sheet, static)), encoding="utf-8")
    for sheet in trimmed:
        (store / "written" / sheet.relative_to(static)).parent.mkdir(parents=True, exist_ok=True)
        (store / "written" / sheet.relative_to(static)).write_bytes(sheet.read_bytes())


BOOK_STATIC = Path(__file__).resolve().parents[1] / "_static"


def _unminified(sheet: Path, static: Path, source: Path = BOOK_STATIC) -> str:
    """The text of a built style sheet to minify: the book's own sheets from ``_static/`` (an incremental
    build leaves an earlier build's minified copy in place when the source changed), the others as built."""
    own = source / sheet.relative_to(static)
    return (own if own.is_file() else sheet).read_text(encoding="utf-8")


# Bootstrap's bundle (the theme's scripts/bootstrap.js) names the classes of all its components, and would keep
# every rule of the theme's sheet for modals, carousels, off-canvas panels, toasts, popovers, accordions and
# scroll-spies, none of which the book has. Of its components the book's pages use the dropdown (the header's
# menus) and the tooltip (the header's buttons), and these add only the classes below to the page at run time
# (Bootstrap 5.3: Dropdown adds ``show``; Tooltip builds ``div.tooltip`` > ``.tooltip-arrow`` + ``.tooltip-inner``
# and adds ``bs-tooltip-<placement>``, ``fade`` and ``show``); the rest of what they style is in the pages' markup.
# So Bootstrap's words are these, not every word of its bundle. A class the book's pages or its other scripts
# name is kept as before.
BOOTSTRAP_SCRIPT = "scripts/bootstrap.js"
BOOTSTRAP_RUNTIME_CLASSES = frozenset({"show", "fade", "tooltip", "tooltip-arrow", "tooltip-inner", "bs-tooltip-"})
# The components those classes are for: a page using another (a collapse, a modal...) would lose its rules, so the
# build refuses it (:func:`check_bootstrap_components`) until the classes above are extended for it.
BOOTSTRAP_COMPONENTS = ("dropdown", "tooltip")
_BS_TOGGLE = re.compile(r'\bdata-bs-toggle="([^"]*)"')


def check_bootstrap_components(html: str, page: str = "the page") -> None:
    """Raise ValueError if ``html`` uses a Bootstrap component (``data-bs-toggle``) other than
    :data:`BOOTSTRAP_COMPONENTS`, whose run-time classes :data:`BOOTSTRAP_RUNTIME_CLASSES` would not keep."""
    others = sorted({kind for kind in _BS_TOGGLE.findall(html) if kind not in BOOTSTRAP_COMPONENTS})
    if others:
        raise ValueError(f"{page}: data-bs-toggle={others} (expected only {list(BOOTSTRAP_COMPONENTS)}): the purge keeps "
                         "rules for Bootstrap's run-time classes of those alone; add this component's classes to "
                         "page_assets.BOOTSTRAP_RUNTIME_CLASSES and its name to BOOTSTRAP_COMPONENTS")


def build_words(outdir: Path) -> set[str]:
    """Every class or id a built book's pages and scripts can put on an element (what the purge keeps rules for):
    the pages' ``class`` and ``id`` attributes and inline scripts, every word of the scripts in ``_static`` (not
    MathJax's, which style their own output), of Bootstrap's bundle only :data:`BOOTSTRAP_RUNTIME_CLASSES`, and
    the Pygments token classes whose spans the build unwrapped (:func:`shipped_plain_tokens`: their rules say what
    colour those spans drew, and which classes are plain when the sheet is read again)."""
    outdir = Path(outdir)
    static = outdir / "_static"
    words = set(BOOTSTRAP_RUNTIME_CLASSES)
    words |= shipped_plain_tokens(outdir)  # the unwrapped tokens keep their rules: what their spans drew with
    for page in _pages(outdir):
        words |= page_words(page.read_text(encoding="utf-8"))
    for script in static.rglob("*.js"):
        name = script.relative_to(static)
        if "mathjax" not in name.parts and name.as_posix() != BOOTSTRAP_SCRIPT:
            words |= script_words(script.read_text(encoding="utf-8"))
    return words


def _purged_sheets(static: Path) -> list[Path]:
    import fnmatch

    return sorted(sheet for sheet in static.rglob("*.css")
                  if any(fnmatch.fnmatch(sheet.relative_to(static).as_posix(), pattern) for pattern in PURGED_SHEETS))


def build_plain_tokens(static: Path) -> frozenset:
    """:func:`plain_token_classes` of the build's ``pygments.css``, checked against its other style sheets."""
    pygments = static / "pygments.css"
    if not pygments.is_file():
        return frozenset()
    others = tuple(sheet.read_text(encoding="utf-8") for sheet in static.rglob("*.css")
                   if sheet != pygments and "mathjax" not in sheet.relative_to(static).parts)
    return plain_token_classes(pygments.read_text(encoding="utf-8"), others)


def shipped_plain_tokens(outdir: Path) -> frozenset:
    """:func:`build_plain_tokens` of the style sheets as shipped (kept by an earlier build in
    ``_build/.page_assets/pristine``), not as an earlier build trimmed them: which token classes are plain
    depends on the rules other sheets hold, and the purge drops some of those. A first build reads ``_static``."""
    pristine = Path(outdir).parent / ".page_assets" / "pristine"
    return build_plain_tokens(pristine if (pristine / "pygments.css").is_file() else Path(outdir) / "_static")


def lighten_build(outdir: Path) -> None:
    """Trim a built book in place: its pages (search scripts, lazy images, plain code tokens), icon fonts and
    style sheets (unmatchable rules, whitespace).

    Run once per build, on files Sphinx has just copied or written (pages it did not rewrite were
    trimmed by an earlier build; trimming a page twice changes nothing).
    """
    outdir = Path(outdir)
    plain = shipped_plain_tokens(outdir)  # from the sheets as shipped, not as purged and minified
    if plain:
        pygments = outdir / "_static" / "pygments.css"
        css = pygments.read_text(encoding="utf-8")
        rules = plain_code_rules(css)
        if rules not in css:  # Sphinx writes pygments.css again on every build; this keeps a second run a no-op
            pygments.write_text(css + "\n" + rules + "\n", encoding="utf-8")
    for page in _pages(outdir):
        html = page.read_text(encoding="utf-8")
        check_bootstrap_components(html, page.relative_to(outdir).as_posix())
        lighter = lighten_page(html, search_page=page == outdir / "search.html", plain_tokens=plain)
        if lighter != html:
            page.write_text(lighter, encoding="utf-8")
    _trim_icons_and_styles(outdir)


def _lighten_build(app, exception):
    if exception is None and app.builder.format == "html":
        lighten_build(Path(app.outdir))


def setup(app):
    source = _mathjax_dir()  # fail at start-up, not after a long build, when MathJax is missing
    missing = [name for name in MATHJAX_FILES if not (source / name).exists()]
    if missing:
        raise RuntimeError(f"MathJax at {source} lacks {missing}; reinstall django-static-mathjax")
    app.connect("config-inited", _defer_nav_script)
    app.connect("build-finished", _copy_mathjax)
    app.connect("build-finished", _lighten_theme)
    app.connect("html-page-context", _drop_thebe)
    # After every other extension's build-finished handler (myst-nb copies its style sheet there).
    app.connect("build-finished", _lighten_build, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
