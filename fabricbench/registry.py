"""An explicit name -> thing table that refuses duplicates and says what exists when asked for a stranger.

Collectives, engines, fabrics and training strategies each keep one of these; adding a variant is one
module plus one `register` line, never import-time discovery.
"""

from __future__ import annotations

from typing import Generic, Iterable, Iterator, TypeVar

from fabricbench.errors import UsageError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str) -> None:
        self.kind = kind  # what the names are, for messages: "op", "engine", "fabric", "strategy"
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        assert name not in self._items, f"duplicate {self.kind} {name!r}"
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UsageError(f"unknown {self.kind} {name!r}; choose from {', '.join(self._items)}") from None

    def names(self) -> list[str]:
        return list(self._items)

    def pick(self, chosen: str | Iterable[str] | None, *, option: str | None = None) -> list[str]:
        """A user's choice: None, "" or "all" -> every name; a comma text or a list -> those names in the
        order given, each one known and none twice (a name given twice would be run, or counted, twice).
        `option` names the flag in messages ("--strategies"); the library's messages name the kind."""
        if chosen is None or (isinstance(chosen, str) and chosen.strip() in ("", "all")):
            return self.names()
        names = [s.strip() for s in (chosen.split(",") if isinstance(chosen, str) else map(str, chosen))]
        names = [s for s in names if s]
        what = option or f"the {self.kind} list"
        if not names:
            raise UsageError(f"{what} is empty; choose from {', '.join(self._items)} or all")
        for name in names:
            self.get(name)
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise UsageError(f"{what} names {', '.join(twice)} twice; give each {self.kind} once")
        return names

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[T]:
        return iter(self._items.values())

    def __len__(self) -> int:
        return len(self._items)
