"""An explicit name -> thing table that refuses duplicates and says what exists when asked for a stranger.

Collectives, engines, fabrics and training strategies each keep one of these; adding a variant is one
module plus one `register` line, never import-time discovery.
"""

from __future__ import annotations

from typing import Generic, Iterator, TypeVar

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

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[T]:
        return iter(self._items.values())

    def __len__(self) -> int:
        return len(self._items)
