"""Deterministic, real-looking prompt text for the benchmark: every prompt distinct.

Owns ``PromptSource``: a seeded pool of sentences (function words, a Zipf-distributed open
vocabulary of real and invented words, names, numbers, dates, punctuation and some non-ASCII
words) grouped into 3,000 paragraphs, from which prompt ``i`` is composed by its own seeded
choice of ~200 paragraphs interleaved with sentences unique to ``i`` (~3.6 characters per token
with the Tekken tokenizer, about English prose's density).
Repeating one text would flatter any tokenizer cache (fastokens has a segment cache), and
lorem ipsum tokenizes unlike prose; this does neither. The load generator asks for JSON-escaped
string literals, the tokenizer-limit measurement for ``str``: the same prompts either way.

Runs on: the load generator process and the tokenizer-limit process (plain Python, no threads).
"""
from __future__ import annotations

import itertools
import random

import orjson

_FUNCTION_WORDS = (
    "the of and to a in that is was he for it with as his on be at by I this had not are but "
    "from or have an they which one you were her all she there would their we him been has when "
    "who will more no if out so said what up its about into than them can only other new some "
    "could time these two may then do first any my now such like our over man me even most made "
    "after also did many before must through back years where much your way well down should "
    "because each just those people how too little state good very make world still own see men "
    "work long get here between both life being under never day same another know while last "
    "might us great old year off come since against go came right used take three").split()

_CONTENT_WORDS = (
    "system report market water history policy council river energy network process village "
    "research engine station museum village harbour language season theory garden voltage "
    "protocol battery kitchen library mountain measure pattern signal account budget customer "
    "winter summer morning evening century painting journal article contract question answer "
    "problem result surface pressure capacity frequency density pipeline compiler database "
    "server request response latency throughput memory storage kernel thread process socket "
    "bridge tunnel highway airport railway ticket border island forest desert valley coast "
    "farmer teacher doctor lawyer engineer student author editor director manager minister "
    "analysis estimate forecast revenue profit interest average median quarter percent "
    "improve reduce measure deliver publish observe reported announced increased declined "
    "quickly slowly carefully roughly nearly almost already rarely often usually finally "
    "government company group problem service family program question number point business "
    "country information development community member school health child student education "
    "area money story fact month lot study book job word issue side kind head house friend "
    "power hour game line end body team level office door person art war party result change "
    "reason girl guy moment air force nothing name city president rate period program view "
    "open build stay fall cut reach kill remain suggest raise pass sell require report decide "
    "national public social political important different large small local major possible "
    "economic military clear recent free available likely true federal international full "
    "special easy strong certain real human sure whole simple similar hard specific private").split()

_NAMES = ("Anna Berlin Charles Dakota Elena Fujimoto García Hannover Ibrahim Jönsson Kowalski "
          "Lisbon Müller Nakamura Oslo Petrova Quebec Rossi Santiago Tanaka Uppsala Valencia "
          "Warsaw Xavier Yamamoto Zürich Ørsted Łódź Dvořák Ñuñoa").split()

_FOREIGN = ("déjà vu façade naïve café résumé über Straße Ärger Öffnung sehr gut "
            "más niño año corazón français très été hôtel "
            "привет город система данных время "
            "σύστημα δεδομένα χρόνος "
            "東京 数据 系统 時間 "
            "—  …  «citation»  “quoted”  ‘single’  €  £  ±  °C  µs  →").split()

# Invented words are built from English morphemes so that they split into BPE pieces about as
# often as real words do (~4 characters per token overall, like English prose).
_PREFIXES = ("", "", "", "", "re", "un", "in", "pre", "con", "dis", "sub", "inter", "trans", "over",
             "de", "ex", "pro", "com", "mis", "out")
_ROOTS = ("form port struct duct spect tract press mit ject vers pos scrib dict cap fer ven sta "
          "tain mov pend plic sens cept graph log phon tend vis cur mark stand work play light "
          "hand land water stone field house wood fish bird book line point start turn call "
          "build test code data net cloud path file note plan trade grow bank care").split()
_SUFFIXES = ("", "", "", "s", "s", "ed", "ing", "ly", "er", "ion", "al", "ness", "ment", "ive",
             "able", "ity", "ous", "ers", "ings", "ation")


class PromptSource:
    """Prompt ``i`` of a seeded benchmark, as text or as JSON-string bytes. Not thread-safe."""

    def __init__(self, seed: int = 0, pool_sentences: int = 6000,
                 pool_paragraphs: int = 3000) -> None:
        self.seed = seed
        rng = random.Random(seed)
        vocab = self._vocabulary(rng)
        # Zipf-like weights: a few frequent words, a long tail of rare ones (as in prose).
        weights = list(itertools.accumulate(1.0 / (rank + 2) ** 1.15 for rank in range(len(vocab))))
        sentences = [self._sentence(rng, vocab, weights) for _ in range(pool_sentences)]
        self._paragraphs = [" ".join(rng.choices(sentences, k=rng.randint(6, 16)))
                            for _ in range(pool_paragraphs)]
        self._par_lengths = [len(p) for p in self._paragraphs]
        self._escaped = [orjson.dumps(p)[1:-1] for p in self._paragraphs]

    @staticmethod
    def _vocabulary(rng: random.Random) -> list[str]:
        invented = set()
        while len(invented) < 12000:
            roots = "".join(rng.choice(_ROOTS) for _ in range(rng.choice((1, 1, 1, 1, 2))))
            invented.add(rng.choice(_PREFIXES) + roots + rng.choice(_SUFFIXES))
        tail = sorted(invented)
        rng.shuffle(tail)
        content = _CONTENT_WORDS[:]
        rng.shuffle(content)
        # Function words first (most frequent), then real content words, then the open tail.
        return _FUNCTION_WORDS + content + tail

    @staticmethod
    def _number(rng: random.Random) -> str:
        kind = rng.random()
        if kind < 0.3:
            return str(rng.randint(2, 999))
        if kind < 0.5:
            return f"{rng.uniform(0, 100):.{rng.randint(1, 3)}f}"
        if kind < 0.65:
            return f"{rng.randint(1, 99)}%"
        if kind < 0.8:
            return f"{rng.randint(1850, 2030)}"
        if kind < 0.9:
            return f"{rng.randint(2000, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        return f"{rng.randint(1, 999):,}{rng.randint(0, 999):03d}"

    def _sentence(self, rng: random.Random, vocab: list[str], weights: list[float]) -> str:
        n = rng.randint(6, 28)
        words = rng.choices(vocab, cum_weights=weights, k=n)
        for i in range(n):
            roll = rng.random()
            if roll < 0.02:
                words[i] = self._number(rng)
            elif roll < 0.05:
                words[i] = rng.choice(_NAMES)
            elif roll < 0.07:
                words[i] = rng.choice(_FOREIGN)
            elif roll < 0.13:
                words[i] += rng.choice((",", ",", ";", ":", ")"))
                if words[i].endswith(")"):
                    words[i] = "(" + words[i]
        words[0] = words[0][:1].upper() + words[0][1:]
        if rng.random() < 0.08:
            words[0] = "\u201c" + words[0]
            words[-1] += "\u201d"
        return " ".join(words) + rng.choice((".", ".", ".", ".", "?", "!", "..."))

    def _parts(self, index: int, chars: int) -> list[int | str]:
        """Paragraph indices (and fresh sentences) of prompt ``index``, about ``chars`` long."""
        rng = random.Random(self.seed * 1_000_003 + index + 1)
        parts: list[int | str] = [self._unique(rng, index)]
        total = len(parts[0])
        count = len(self._paragraphs)
        while total < chars:
            if len(parts) % 8 == 0:
                part: int | str = self._unique(rng, index)
                total += len(part) + 2
            else:
                part = rng.randrange(count)
                total += self._par_lengths[part] + 2
            parts.append(part)
        return parts

    def _unique(self, rng: random.Random, index: int) -> str:
        # Sentences that exist in this prompt only: a different prefix per prompt, and numbers
        # that no other prompt has (no whole-prompt or prefix cache can help).
        return (f"Record {index}-{rng.getrandbits(40):x} was filed on "
                f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
                f"with reference {rng.randint(10**6, 10**9)}.")

    def text(self, index: int, chars: int) -> str:
        """Prompt ``index``: ``chars`` characters or up to one paragraph (~1.5k) more."""
        paragraphs = self._paragraphs
        return "\n\n".join(p if isinstance(p, str) else paragraphs[p]
                            for p in self._parts(index, chars))

    def json_bytes(self, index: int, chars: int) -> bytes:
        """``text(index, chars)`` as a JSON string literal (with quotes), UTF-8.

        PERF: joined from pre-escaped paragraphs (JSON escaping is per character, so the join
        of escaped pieces is the escaped join): ~50 us per 300k-character prompt, where
        generating the text and escaping it costs ~1.5 ms of the load generator's core.
        """
        escaped = self._escaped
        return b'"' + b"\\n\\n".join(orjson.dumps(p)[1:-1] if isinstance(p, str) else escaped[p]
                                     for p in self._parts(index, chars)) + b'"'


def short_prompt(index: int, seed: int = 0) -> str:
    """A short chat-like prompt (60-160 characters) for the streaming scenario."""
    rng = random.Random(seed * 7919 + index)
    words = rng.choices(_FUNCTION_WORDS[:60] + _CONTENT_WORDS, k=rng.randint(10, 26))
    return "Please write about " + " ".join(words) + "."
