"""What an answer states, and whether it states a value: the rule every verifier of rlscale applies first.

A verifier that evaluates expressions (Math-Verify reads "42 * 25" as 1050) would reward a policy that
repeats the question, so an answer scores only when the final answer it states is a value.

- **Repeated prompt.** The paragraphs of the prompt that the answer repeats are taken out first: a
  repeated word problem states nothing, whatever numbers it holds.
- **The stated answer** is the content of the answer's ``\\boxed{}`` (several boxes must agree; an
  unclosed box states nothing); else the whole answer when it is one line of mathematics only ("3/4",
  "(-\\infty, 0]", "6 - 5i", "42 * 25 = 1050"); else the last value the text states: its spans are the
  formulas (``$...$``, ``\\(...\\)``, ``\\[...\\]``) and the runs of numbers, operators and brackets, and
  the last span that is neither the left side of an ``=`` nor an expression to evaluate is the answer
  ("The result is 5, as 7 - 2 shows." states 5; "1050 = 42 * 25" states nothing). A span that ends a list
  of different candidates ("8 or 9", "8, 9", "$8$ and $9$", one per line) states nothing. Of a formula or
  line with ``=`` only the part after the last ``=`` counts: "42 * 25 = 1040" states 1040.
- **An expression to evaluate** holds an arithmetic operator between two numbers (``+ - * / ^ x × ÷ ·``,
  ``\\times \\cdot \\div \\pm``, ``**``: "3 + 4 + 5", "42*25", "2^{10}"), numbers multiplied by
  brackets ("(42)(25)"), a sign on a sign ("5 - -3", "--3"), or a fraction of two integers not in lowest
  terms ("6/8", "\\frac{84}{7}", "12/1"): the arithmetic is left undone. A value may be signed ("-3"), a
  decimal, carry thousands separators ("1,050") or a percent sign, or be a symbolic value that Math-Verify
  compares by value (``\\frac{1}{2}`` = 1/2 = 0.5, ``2\\sqrt{2}``, ``-\\pi/6``, ``6 - 5i``, intervals,
  tuples): a number next to one letter or a LaTeX command is a term, not a number ("5i", "2\\sqrt{2}"),
  while one with a word glued to it is still a number ("12cm").
- **Several values**: outside brackets, a comma that does not separate thousands, a semicolon, "or",
  "and", or two numbers side by side ("8 9"); refused where the reference is one value.

A reference that is itself an expression to evaluate (a task whose answer is an expression, such as
reasoning-gym's countdown) lifts the last two rules: its answers are read the same way, expressions
included.
"""
from __future__ import annotations

import math
import re
from typing import List, Optional, Tuple

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_TEX_ENV = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$(?!\$)([^$\n]+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
_TEXT_ARG = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_COMMAND = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{2,}")

_NUMBER = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+"
_BRACED = r"\{(?:[^{}]|\{[^{}]*\})*\}"
_TEX_TERM = rf"(?:\d+(?:\.\d+)?\s*)?\\(?:[dt]?frac|sqrt|pi|infty|circ)(?:\s*{_BRACED}|\d)*"
_OPERAND = rf"(?:{_TEX_TERM}|(?:{_NUMBER})%?(?![\d\\]|[A-Za-z_](?![A-Za-z])))"
_OPERATOR = r"\s*(?:\*\*|[-+*/^×÷·−x]|\\times|\\cdot|\\div|\\pm)\s*"
_OPEN = r"(?:[-−+]\s*|\(\s*)*"
_CLOSE = r"(?:\s*\))*"
_SPAN = re.compile(rf"(?<![\w.\\]){_OPEN}{_OPERAND}(?:{_CLOSE}{_OPERATOR}{_OPEN}{_OPERAND})*{_CLOSE}")
_LIST_GAP = re.compile(r"[\s,;/&|()]*(?:(?:or|and|either|nor|maybe|perhaps|possibly)\b[\s,;/&|()]*)*", re.I)
_EQUALS = re.compile(r"(?<![<>!=\\:])(?:=|≈)(?!=)")
_LEFT_SIDE = re.compile(r"\s*(?:=|≈)(?!=)")

_SYMBOLS = str.maketrans({"×": "*", "·": "*", "∗": "*", "÷": "/", "−": "-", "–": "-"})
_TEX_OPERATORS = ((r"\times", "*"), (r"\cdot", "*"), (r"\ast", "*"), (r"\div", "/"), (r"\pm", "±"), (r"\mp", "±"),
                  ("{,}", ","), (r"\left", ""), (r"\right", ""), (r"\,", ""), (r"\!", ""), (r"\ ", " "))
_TEX_FRACTION = re.compile(r"\\[dt]?frac\s*(?:\{\s*([-+]?\d+)\s*\}|(\d))\s*(?:\{\s*([-+]?\d+)\s*\}|(\d))")
_BARE_NUMBER = re.compile(r"(?<![A-Za-z}\\])[{(]\s*([-+]?\d+(?:\.\d+)?%?)\s*[})]")
_FRACTION = re.compile(r"(?<![\w.)}^/*])([-+]?\d+)\s*/\s*(\d+)(?![\w.({\\/^])")
_NUM = r"\d+(?:[.,]\d+)*%?"
_OPERATION = re.compile(rf"(?<![\w.\\]){_NUM}\s*(?:(?:\*\*|[-+*/^±])\s*[-+]?|x)\s*{_NUM}(?![\w\\])"
                        r"|[-+±]\s*[-+±]\s*\d")
_JUXTAPOSED = re.compile(r"\d\s*\)\s*\(\s*[-+]?\d|(?<![\w.\\])\d+(?:\.\d+)?\s*\(\s*[-+]?\d")
_GROUP = re.compile(r"[(\[][^()\[\]]*[)\]]|\{[^{}]*\}")
_LIST = re.compile(r",(?!\d{3}(?!\d))|;|\b(?:or|and)\b|\d(?:\s{2,}|\s(?!\d{3}(?!\d)))[-+]?\d", re.I)


def boxed_contents(text: str) -> Optional[List[str]]:
    """The contents of the outermost closed ``\\boxed{}`` / ``\\fbox{}`` in order; None when a box is left
    open (one pass over the text)."""
    openings = {m.end() - 1 for m in _BOX.finditer(text)}
    stack: List[int] = []
    closed: List[Tuple[int, int]] = []
    for i, char in enumerate(text):
        if char == "{":
            stack.append(i)
        elif char == "}" and stack:
            start = stack.pop()
            if start in openings:
                closed.append((start, i))
    if len(closed) < len(openings):
        return None
    outermost, end = [], -1
    for start, stop in sorted(closed):
        if start > end:
            outermost.append(text[start + 1:stop].strip())
            end = stop
    return outermost


def _unwrapped(text: str) -> str:
    """``text`` without surrounding whitespace, Markdown bold, math delimiters and a final full stop."""
    previous = None
    while text != previous:
        previous = text
        text = text.strip().strip("*").strip()
        if text.endswith("."):
            text = text[:-1].rstrip()
        for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
            if len(text) > len(left) + len(right) and text.startswith(left) and text.endswith(right):
                text = text[len(left):-len(right)]
    return text


def _math_line(text: str) -> bool:
    """One line without a word of two letters or more outside LaTeX commands (``\\text{}`` content counts
    as mathematics)."""
    return "\n" not in text and not _WORD.search(_COMMAND.sub(" ", _TEXT_ARG.sub(" ", text)))


def _balanced(span: str) -> str:
    """``span`` without the opening brackets it does not close and the closing ones it does not open."""
    span = span.strip()
    while span.startswith("(") and span.count("(") > span.count(")"):
        span = span[1:].lstrip()
    while span.endswith(")") and span.count(")") > span.count("("):
        span = span[:-1].rstrip()
    return span


def _spans(text: str) -> List[Tuple[int, int, str]]:
    """(start, end, content) of the formulas and the runs of numbers and operators of free text, in order."""
    spans = [(m.start(), m.end(), next(g for g in m.groups() if g is not None)) for m in _TEX_ENV.finditer(text)]
    masked = list(text)
    for start, end, _ in spans:
        masked[start:end] = " " * (end - start)
    spans += [(m.start(), m.end(), _balanced(m.group())) for m in _SPAN.finditer("".join(masked))]
    return sorted(spans)


def _after_last_equals(text: str) -> Optional[str]:
    """The part after the last ``=`` (``text`` itself when it has none or is a list of equations such as
    ``x=1, y=2``); None when nothing follows it."""
    parts = _EQUALS.split(text)
    if len(parts) == 1 or several(text):
        return text
    return _unwrapped(parts[-1]) or None


def _listed(text: str, spans: List[Tuple[int, int, str]], last: int) -> bool:
    """Whether span ``last`` ends a list of different candidates (spans joined by "or", commas, line
    breaks...)."""
    values = {"".join(spans[last][2].split())}
    for i in range(last, 0, -1):
        if not _LIST_GAP.fullmatch(text[spans[i - 1][1]:spans[i][0]]):
            break
        values.add("".join(spans[i - 1][2].split()))
    return len(values) > 1


def _last_value(text: str, values_only: bool) -> Optional[str]:
    """The last span of free text that states a value (with ``values_only``, an expression to evaluate
    states none); the whole text when it has no span; None when no span states one or the answer ends a
    list of candidates."""
    spans = _spans(text)
    if not spans:
        return text
    for i in range(len(spans) - 1, -1, -1):
        if _LEFT_SIDE.match(text, spans[i][1]):
            continue
        answer = _after_last_equals(_unwrapped(spans[i][2]))
        if answer is not None and not (values_only and needs_evaluating(answer)):
            return None if _listed(text, spans, i) else answer
    return None


def stated_answer(text: str, values_only: bool = True) -> Optional[str]:
    """The final answer ``text`` states (see the module docstring); None when it states none. With
    ``values_only`` off, an expression in free text counts as stated too."""
    boxes = boxed_contents(text)
    if boxes is None:
        return None
    if boxes:
        answers = {stated_answer(box, values_only) for box in boxes}
        return answers.pop() if len(answers) == 1 else None
    text = _unwrapped(text)
    if not text:
        return None
    if _math_line(text):
        return _after_last_equals(text)
    return _last_value(text, values_only)


def _normalized(text: str) -> str:
    """``text`` with its operators in ASCII and LaTeX spacing and ``\\left``/``\\right`` removed."""
    text = text.translate(_SYMBOLS)
    for tex, plain in _TEX_OPERATORS:
        text = text.replace(tex, plain)
    return text


def _lowest_terms(numerator: str, denominator: str) -> bool:
    num, den = int(numerator), int(denominator)
    return den > 1 and math.gcd(num, den) == 1


def needs_evaluating(text: str) -> bool:
    """Whether ``text`` holds arithmetic left undone: an operator between two numbers, numbers multiplied
    by brackets ("(42)(25)", "42(25)"), a sign on a sign, or a fraction of integers not in lowest terms."""
    text = _normalized(text)
    if _JUXTAPOSED.search(text):
        return True
    for match in _TEX_FRACTION.finditer(text):
        numerator, denominator = match.group(1) or match.group(2), match.group(3) or match.group(4)
        if not _lowest_terms(numerator, denominator):
            return True
    text = _BARE_NUMBER.sub(r" \1 ", _TEX_FRACTION.sub(" 1 ", text))
    for match in _FRACTION.finditer(text):
        if not _lowest_terms(match.group(1), match.group(2)):
            return True
    return bool(_OPERATION.search(_FRACTION.sub(" 1 ", text)))


def several(text: str) -> bool:
    """Whether ``text`` lists several values outside brackets (see the module docstring)."""
    text = _normalized(_TEXT_ARG.sub(r" \1 ", text))
    previous = None
    while text != previous:
        previous, text = text, _GROUP.sub(" ", text)
    return bool(_LIST.search(text))


def without_prompt(answer_text: str, prompt: str) -> str:
    """``answer_text`` without the paragraphs of ``prompt`` it repeats."""
    for paragraph in prompt.split("\n\n"):
        if paragraph.strip():
            answer_text = answer_text.replace(paragraph.strip(), " ")
    return answer_text


def stated_value(answer_text: str, reference: str, prompt: str = "") -> Optional[str]:
    """The final answer ``answer_text`` states, once the paragraphs of ``prompt`` it repeats are taken
    out, when it states a value as ``reference`` does (one value where the reference is one); None
    otherwise. A reference that is an expression to evaluate accepts any stated answer."""
    values_only = not needs_evaluating(reference)
    answer = stated_answer(without_prompt(answer_text, prompt), values_only)
    if answer is None or not values_only:
        return answer
    if needs_evaluating(answer) or (several(answer) and not several(reference)):
        return None
    return answer
