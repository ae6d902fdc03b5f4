"""One registry pattern for the output parsers: parser classes by vLLM's name, built-in families
imported on first use, plugins registering their own classes (a later registration wins).

``text.tool_parsers.registry`` and ``text.reasoning.base`` each hold one ``ParserRegistry``.

Runs on: start-up of each worker (``register`` at import, ``get``); written only then, read after.
"""
from __future__ import annotations

import importlib
from typing import Callable, Generic, TypeVar

T = TypeVar("T", bound=type)


class ParserRegistry(Generic[T]):
    """Parser classes of one kind (subclasses of ``base``) by name.

    Args:
        kind: what the names are, for messages ("tool call parser", "reasoning parser").
        base: the class every registered parser subclasses.
        package: where the built-in modules live.
        builtin: built-in name -> the module of ``package`` that registers it.
        unavailable: vLLM names greenfront does not build -> why (the refusal's message).
    """

    def __init__(self, kind: str, base: type, package: str, builtin: dict[str, str],
                 unavailable: dict[str, str] | None = None) -> None:
        self.kind, self.base, self.package, self.builtin = kind, base, package, builtin
        self.unavailable = dict(unavailable or {})
        self._registered: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Class decorator: make ``cls`` the parser called ``name``."""
        def decorate(cls: T) -> T:
            if not (isinstance(cls, type) and issubclass(cls, self.base)):
                raise TypeError(f"{cls!r} is not a {self.base.__name__} subclass")
            cls.name = name
            self._registered[name] = cls
            return cls
        return decorate

    def get(self, name: str) -> T:
        """The class registered as ``name``.

        Raises:
            KeyError: no such parser (the message says why, or lists the known names).
        """
        if name not in self._registered and name in self.builtin:
            importlib.import_module(f"{self.package}.{self.builtin[name]}")
        try:
            return self._registered[name]
        except KeyError:
            if name in self.unavailable:
                raise KeyError(f"{self.kind} {name!r} is not built in greenfront: "
                               f"{self.unavailable[name]}") from None
            raise KeyError(f"{self.kind} {name!r} is not known; known parsers: "
                           f"{', '.join(self.names())}") from None

    def names(self) -> list[str]:
        return sorted(set(self.builtin) | set(self._registered))
