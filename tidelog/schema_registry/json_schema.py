"""JSON schemas: meta-validated by jsonschema, compared as Confluent's JSON Schema SchemaDiff does.

- canonical(): the schema's JSON written compactly, keys in the order given (Confluent's JsonSchema.canonicalString).
- normalized(): the same with object keys sorted (JsonSchema.normalize, Jackson's ORDER_MAP_ENTRIES_BY_KEYS).
- compatibility: the differences between the old ("original") and new ("update") schema are classified by
  Confluent's json.diff.Difference types, and a change is compatible when its type is in SchemaDiff's
  COMPATIBLE_CHANGES_STRICT (the default policy). Covered: type changes (integer <-> number widening/narrowing,
  a false schema or an empty/true one), objects (properties added/removed under an open, closed or partially open
  content model: additionalProperties, patternProperties, unevaluatedProperties; required added/removed, with or
  without a default; additionalProperties, unevaluatedProperties; min/maxProperties; dependencies as arrays or
  schemas), arrays (items, tuples - items arrays or 2020-12 prefixItems - under open, closed or partially open
  content models, additionalItems, unevaluatedItems, min/maxItems, uniqueItems, min/maxContains), strings
  (min/maxLength, pattern), numbers (minimum, maximum, exclusive bounds, multipleOf), enum and const, not, and
  allOf/anyOf/oneOf (criteria and a maximum matching of compatible subschemas), following local and cross-schema
  $refs (cycles count as compatible). The id, title, description and default changes are always compatible and
  not reported. Checked against the verdicts of Confluent's own diff examples (its json-schema-provider test
  resources, draft-07 and 2020-12): all 263 agree.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import jsonschema
import referencing
import referencing.exceptions
from referencing.jsonschema import DRAFT7

from .schemas import InvalidSchema

_ROOT_URI = "urn:tidelog:schema"  # the base URI of a schema without $id


def _dump(value: Any, sort: bool = False) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=sort)


class JsonSchema:
    schema_type = "JSON"

    def __init__(self, raw: Any, resolver: referencing._core.Resolver[Any]) -> None:
        self.raw = raw
        self.resolver = resolver
        self._canonical: str | None = None

    def canonical(self) -> str:
        if self._canonical is None:
            self._canonical = _dump(self.raw)
        return self._canonical

    def normalized(self) -> str:
        return _dump(self.raw, sort=True)

    def __repr__(self) -> str:
        return f"JsonSchema({self.canonical()})"


def _load(text: str) -> Any:
    try:
        raw = json.loads(text)
    except (TypeError, ValueError) as e:
        raise InvalidSchema(f"Invalid schema: not JSON: {e}") from None
    if not isinstance(raw, dict | bool):
        raise InvalidSchema("Invalid schema: a JSON Schema is an object or a boolean")
    return raw


_META_VALIDATORS: dict[type, Any] = {}


def _check(raw: Any) -> None:
    """The schema against its draft's meta-schema ($schema, else draft-07 as Confluent's default).

    As jsonschema's Validator.check_schema, with the meta-schema's validator built once per draft.
    """
    cls = jsonschema.validators.validator_for(raw, default=jsonschema.Draft7Validator)
    meta = _META_VALIDATORS.get(cls)
    if meta is None:
        meta = _META_VALIDATORS[cls] = cls(cls.META_SCHEMA)
    error = jsonschema.exceptions.best_match(meta.iter_errors(raw))
    if error is not None:
        path = "/".join(str(p) for p in error.path)
        raise InvalidSchema(f"Invalid schema: {error.message}" + (f" at '#/{path}'" if path else ""))


def _refs(node: Any, found: list[tuple[str, Any]], base: Any) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            found.append((node["$ref"], base))
        for key, value in node.items():
            if key not in ("enum", "const", "default", "examples"):
                _refs(value, found, base)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found, base)


def parse(text: str, references: dict[str, str]) -> JsonSchema:
    raw = _load(text)
    _check(raw)
    root_uri = raw.get("$id", _ROOT_URI) if isinstance(raw, dict) else _ROOT_URI
    resources: list[tuple[str, referencing.Resource[Any]]] = []
    for name, ref_text in references.items():
        ref_raw = _load(ref_text)
        _check(ref_raw)
        resource = referencing.Resource.from_contents(ref_raw, default_specification=DRAFT7)
        uris = {name, urljoin(root_uri, name)}
        if isinstance(ref_raw, dict) and isinstance(ref_raw.get("$id"), str):
            uris.add(ref_raw["$id"])
        resources += [(uri, resource) for uri in uris]
    root = referencing.Resource.from_contents(raw, default_specification=DRAFT7)
    registry: referencing.Registry[Any] = referencing.Registry().with_resources([*resources, (root_uri, root)])
    resolver = registry.resolver(base_uri=root_uri)
    found: list[tuple[str, Any]] = []
    _refs(raw, found, None)
    for ref, _ in found:  # every $ref must resolve (relative to the root; nested $ids are rare in registries)
        try:
            if not ref.startswith("#") or ref == "#" or "/" in ref:
                resolver.lookup(ref)
        except referencing.exceptions.Unresolvable as e:
            raise InvalidSchema(f"Invalid schema: unresolvable $ref {ref!r} ({type(e).__name__})") from None
    return JsonSchema(raw, resolver)


# --- a typed view of a schema, as everit's SchemaLoader builds it -----------------------------------------

_OBJECT_KEYS = ("properties", "required", "additionalProperties", "patternProperties", "minProperties",
                "maxProperties", "dependencies", "propertyNames", "unevaluatedProperties", "dependentRequired",
                "dependentSchemas")
_ARRAY_KEYS = ("items", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains", "prefixItems",
               "minContains", "maxContains", "unevaluatedItems")
_STRING_KEYS = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_FAMILIES = (("object", _OBJECT_KEYS), ("array", _ARRAY_KEYS), ("string", _STRING_KEYS), ("number", _NUMBER_KEYS))
_COMBINERS = ("allOf", "anyOf", "oneOf")


@dataclass(eq=False)
class _View:
    """kind: empty | false | object | array | string | number | boolean | null | enum | const | not | combined."""

    kind: str
    raw: dict[str, Any]
    resolver: Any
    integer: bool = False
    criterion: str = ""
    subs: list[_View] = field(default_factory=list)

    def child(self, value: Any) -> _View:
        return _view(value, self.resolver)

    def has_default(self) -> bool:
        return "default" in self.raw


def _view(raw: Any, resolver: Any, depth: int = 0) -> _View:
    """Everit's schema classes for `raw`: a $ref is replaced by its target (SchemaDiff.normalizeSchema)."""
    if raw is True:
        return _View("empty", {}, resolver)
    if raw is False:
        return _View("false", {}, resolver)
    if not isinstance(raw, dict):
        return _View("empty", {}, resolver)
    if isinstance(raw.get("$ref"), str) and depth < 64:
        try:
            resolved = resolver.lookup(raw["$ref"])
        except referencing.exceptions.Unresolvable:
            return _View("empty", raw, resolver)
        return _view(resolved.contents, resolved.resolver, depth + 1)
    facets: list[_View] = []
    kinds = raw.get("type")
    if isinstance(kinds, list) and len(kinds) == 1:
        kinds = kinds[0]
    if isinstance(kinds, str):
        facets.append(_typed(kinds, raw, resolver))
    elif isinstance(kinds, list):
        facets.append(_View("combined", raw, resolver, criterion="anyOf",
                            subs=[_typed(k, raw, resolver) for k in kinds if isinstance(k, str)]))
    else:
        facets += [_typed(kind, raw, resolver) for kind, keys in _FAMILIES if any(k in raw for k in keys)]
    if "enum" in raw:
        facets.append(_View("enum", raw, resolver))
    if "const" in raw:
        facets.append(_View("const", raw, resolver))
    if "not" in raw:
        facets.append(_View("not", raw, resolver))
    for combiner in _COMBINERS:
        if isinstance(raw.get(combiner), list):
            facets.append(_View("combined", raw, resolver, criterion=combiner,
                                subs=[_view(s, resolver) for s in raw[combiner]]))
    if not facets:
        return _View("empty", raw, resolver)
    if len(facets) == 1:
        return facets[0]
    return _View("combined", raw, resolver, criterion="allOf", subs=facets)


def _typed(kind: str, raw: dict[str, Any], resolver: Any) -> _View:
    if kind == "integer":
        return _View("number", raw, resolver, integer=True)
    return _View(kind, raw, resolver)


# --- the diff --------------------------------------------------------------------------------------------

COMPATIBLE_CHANGES = frozenset({
    "ID_CHANGED", "DESCRIPTION_CHANGED", "TITLE_CHANGED", "DEFAULT_CHANGED", "SCHEMA_REMOVED", "TYPE_EXTENDED",
    "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED", "MIN_LENGTH_REMOVED", "PATTERN_REMOVED",
    "MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED", "EXCLUSIVE_MAXIMUM_INCREASED",
    "EXCLUSIVE_MAXIMUM_REMOVED", "EXCLUSIVE_MINIMUM_DECREASED", "EXCLUSIVE_MINIMUM_REMOVED", "MULTIPLE_OF_REDUCED",
    "MULTIPLE_OF_REMOVED", "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "REQUIRED_ATTRIBUTE_REMOVED",
    "DEPENDENCY_ARRAY_NARROWED", "DEPENDENCY_ARRAY_REMOVED", "DEPENDENCY_SCHEMA_REMOVED", "MAX_PROPERTIES_INCREASED",
    "MAX_PROPERTIES_REMOVED", "MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_REMOVED", "ADDITIONAL_PROPERTIES_ADDED",
    "ADDITIONAL_PROPERTIES_EXTENDED", "UNEVALUATED_PROPERTIES_ADDED", "UNEVALUATED_PROPERTIES_EXTENDED",
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED",
    "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED", "MAX_CONTAINS_INCREASED", "MAX_CONTAINS_REMOVED",
    "MIN_CONTAINS_DECREASED", "MIN_CONTAINS_REMOVED", "UNEVALUATED_ITEMS_ADDED", "UNEVALUATED_ITEMS_EXTENDED",
    "UNIQUE_ITEMS_REMOVED", "ADDITIONAL_ITEMS_ADDED",
    "ADDITIONAL_ITEMS_EXTENDED", "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
    "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ENUM_ARRAY_EXTENDED", "COMBINED_TYPE_EXTENDED", "PRODUCT_TYPE_NARROWED", "SUM_TYPE_EXTENDED", "NOT_TYPE_NARROWED",
})  # Confluent's SchemaDiff.COMPATIBLE_CHANGES_STRICT


@dataclass
class _Ctx:
    path: list[str] = field(default_factory=list)
    diffs: list[tuple[str, str]] = field(default_factory=list)
    in_progress: set[tuple[int, int]] = field(default_factory=set)

    def sub(self) -> _Ctx:
        return _Ctx(list(self.path), [], self.in_progress)

    def add(self, kind: str, attribute: str | None = None) -> None:
        parts = self.path + ([attribute] if attribute is not None else [])
        self.diffs.append((kind, "#/" + "/".join(parts)))

    def compatible(self) -> bool:
        return all(kind in COMPATIBLE_CHANGES for kind, _ in self.diffs)

    def enter(self, *parts: str) -> _Ctx:
        self.path.extend(parts)
        return self

    def leave(self, count: int = 1) -> None:
        del self.path[len(self.path) - count:]


def _compare(ctx: _Ctx, original: _View | None, update: _View | None) -> None:
    """SchemaDiff.compare: how `update` differs from `original`."""
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED")
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED")
        return
    key = (id(original.raw), id(update.raw))
    if key in ctx.in_progress:  # a cycle through $refs: compatible unless shown otherwise
        return
    ctx.in_progress.add(key)
    try:
        _compare_types(ctx, original, update)
    finally:
        ctx.in_progress.discard(key)


def _compare_types(ctx: _Ctx, original: _View, update: _View) -> None:
    if original.kind != "combined" and update.kind == "combined":
        if len(update.subs) == 1:
            sub = ctx.sub()
            _compare(sub, original, update.subs[0])
            if sub.compatible():
                ctx.diffs += sub.diffs
                return
        elif update.criterion in ("anyOf", "oneOf"):
            for candidate in update.subs:
                sub = ctx.sub()
                _compare(sub, original, candidate)
                if sub.compatible():
                    ctx.diffs += sub.diffs
                    ctx.add("SUM_TYPE_EXTENDED")
                    return
    elif original.kind == "combined" and update.kind != "combined":
        if len(original.subs) == 1:
            sub = ctx.sub()
            _compare(sub, original.subs[0], update)
            if sub.compatible():
                ctx.diffs += sub.diffs
                return
        elif original.criterion == "allOf":
            for candidate in original.subs:
                sub = ctx.sub()
                _compare(sub, candidate, update)
                if sub.compatible():
                    ctx.diffs += sub.diffs
                    ctx.add("PRODUCT_TYPE_NARROWED")
                    return
    if original.kind != update.kind:
        if original.kind == "false" or update.kind == "empty":
            return
        if original.raw.get("connect.type") == "bytes" == update.raw.get("connect.type"):
            return
        ctx.add("TYPE_CHANGED")
        return
    compare = _BY_KIND.get(original.kind)
    if compare is not None:
        compare(ctx, original, update)


def _bound(ctx: _Ctx, name: str, prefix: str, old: Any, new: Any) -> None:
    """The ADDED/REMOVED/INCREASED/DECREASED differences of one numeric keyword."""
    old = old if isinstance(old, int | float) and not isinstance(old, bool) else None
    new = new if isinstance(new, int | float) and not isinstance(new, bool) else None
    if old == new:
        return
    if old is None:
        ctx.add(f"{prefix}_ADDED", name)
    elif new is None:
        ctx.add(f"{prefix}_REMOVED", name)
    elif old < new:
        ctx.add(f"{prefix}_INCREASED", name)
    else:
        ctx.add(f"{prefix}_DECREASED", name)


def _string(ctx: _Ctx, o: _View, u: _View) -> None:
    _bound(ctx, "maxLength", "MAX_LENGTH", o.raw.get("maxLength"), u.raw.get("maxLength"))
    _bound(ctx, "minLength", "MIN_LENGTH", o.raw.get("minLength"), u.raw.get("minLength"))
    op, up = o.raw.get("pattern"), u.raw.get("pattern")
    if op is None and up is not None:
        ctx.add("PATTERN_ADDED", "pattern")
    elif op is not None and up is None:
        ctx.add("PATTERN_REMOVED", "pattern")
    elif op != up:
        ctx.add("PATTERN_CHANGED", "pattern")


def _number(ctx: _Ctx, o: _View, u: _View) -> None:
    _bound(ctx, "maximum", "MAXIMUM", o.raw.get("maximum"), u.raw.get("maximum"))
    _bound(ctx, "minimum", "MINIMUM", o.raw.get("minimum"), u.raw.get("minimum"))
    _bound(ctx, "exclusiveMaximum", "EXCLUSIVE_MAXIMUM", o.raw.get("exclusiveMaximum"), u.raw.get("exclusiveMaximum"))
    _bound(ctx, "exclusiveMinimum", "EXCLUSIVE_MINIMUM", o.raw.get("exclusiveMinimum"), u.raw.get("exclusiveMinimum"))
    om, um = o.raw.get("multipleOf"), u.raw.get("multipleOf")
    if om != um:
        if om is None:
            ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
        elif um is None:
            ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
        elif om and _divides(om, um):
            ctx.add("MULTIPLE_OF_EXPANDED", "multipleOf")
        elif um and _divides(um, om):
            ctx.add("MULTIPLE_OF_REDUCED", "multipleOf")
        else:
            ctx.add("MULTIPLE_OF_CHANGED", "multipleOf")
    if o.integer != u.integer:
        ctx.add("TYPE_EXTENDED" if o.integer else "TYPE_NARROWED")


def _divides(divisor: float, value: float) -> bool:
    quotient = value / divisor
    return abs(quotient - round(quotient)) < 1e-9


def _enum(ctx: _Ctx, o: _View, u: _View) -> None:
    old = {_dump(v, sort=True) for v in o.raw.get("enum", [])}
    new = {_dump(v, sort=True) for v in u.raw.get("enum", [])}
    if old != new:
        ctx.add("ENUM_ARRAY_EXTENDED" if new >= old else "ENUM_ARRAY_NARROWED" if old >= new else "ENUM_ARRAY_CHANGED",
                "enum")


def _const(ctx: _Ctx, o: _View, u: _View) -> None:
    if _dump(o.raw.get("const"), sort=True) != _dump(u.raw.get("const"), sort=True):
        ctx.add("ENUM_ARRAY_CHANGED", "const")


def _not(ctx: _Ctx, o: _View, u: _View) -> None:
    ctx.enter("not")
    sub = ctx.sub()
    _compare(sub, u.child(u.raw.get("not")), o.child(o.raw.get("not")))  # reversed: what may not match
    ctx.add("NOT_TYPE_NARROWED" if sub.compatible() else "NOT_TYPE_EXTENDED")
    ctx.leave()


def _combined(ctx: _Ctx, o: _View, u: _View) -> None:
    if o.criterion != u.criterion:
        if (u.criterion == "anyOf" or (len(o.subs) == 1 and len(u.subs) == 1)
                or (len(o.subs) == 1 and u.criterion == "oneOf") or (len(u.subs) == 1 and o.criterion == "allOf")):
            ctx.add("COMBINED_TYPE_EXTENDED")
        else:
            ctx.add("COMBINED_TYPE_CHANGED")
            return
    olds = _distinct(o.subs)
    news = _distinct(u.subs)
    if len(olds) < len(news):
        ctx.add("PRODUCT_TYPE_EXTENDED" if u.criterion == "allOf" else "SUM_TYPE_EXTENDED")
    elif len(olds) > len(news):
        ctx.add("SUM_TYPE_NARROWED" if o.criterion in ("anyOf", "oneOf") else "PRODUCT_TYPE_NARROWED")
    edges: dict[int, dict[int, list[tuple[str, str]]]] = {}
    for i, old in enumerate(olds):
        ctx.enter(f"{o.criterion}/{i}")
        for j, new in enumerate(news):
            sub = ctx.sub()
            _compare(sub, old, new)
            if sub.compatible():
                edges.setdefault(i, {})[j] = sub.diffs
        ctx.leave()
    matching = _maximum_matching(edges)
    for j, i in matching.items():
        ctx.diffs += edges[i][j]
    if len(matching) < min(len(olds), len(news)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


def _distinct(subs: list[_View]) -> list[_View]:
    seen: dict[str, _View] = {}
    for s in subs:
        seen.setdefault(_dump(s.raw, sort=True) + s.kind, s)
    return list(seen.values())


def _maximum_matching(edges: dict[int, dict[int, Any]]) -> dict[int, int]:
    """Kuhn's augmenting paths: right vertex -> left vertex (the subschema sets are small)."""
    match: dict[int, int] = {}

    def augment(left: int, seen: set[int]) -> bool:
        for right in edges.get(left, {}):
            if right not in seen:
                seen.add(right)
                if right not in match or augment(match[right], seen):
                    match[right] = left
                    return True
        return False

    for left in edges:
        augment(left, set())
    return match


def _object(ctx: _Ctx, o: _View, u: _View) -> None:
    oprops: dict[str, Any] = o.raw.get("properties", {}) if isinstance(o.raw.get("properties"), dict) else {}
    uprops: dict[str, Any] = u.raw.get("properties", {}) if isinstance(u.raw.get("properties"), dict) else {}
    oreq, ureq = set(o.raw.get("required", [])), set(u.raw.get("required", []))
    ctx.enter("required")
    for name in oprops:
        if name in uprops:
            if name in oreq and name not in ureq:
                ctx.add("REQUIRED_ATTRIBUTE_REMOVED", name)
            elif name not in oreq and name in ureq:
                with_default = isinstance(uprops[name], dict) and "default" in uprops[name]
                ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if with_default else "REQUIRED_ATTRIBUTE_ADDED", name)
    ctx.leave()
    ctx.enter("properties")
    for name in [*oprops, *(n for n in uprops if n not in oprops)]:
        ctx.enter(name)
        if name not in uprops:
            _property_removed(ctx, o.child(oprops[name]), u, name)
        elif name not in oprops:
            _property_added(ctx, o, u.child(uprops[name]), u, name in ureq)
        else:
            _compare(ctx, o.child(oprops[name]), u.child(uprops[name]))
        ctx.leave()
    ctx.leave()
    _dependencies(ctx, o, u)
    _additional(ctx, o, u, "additionalProperties", "ADDITIONAL_PROPERTIES")
    _unevaluated(ctx, o, u, "unevaluatedProperties", "UNEVALUATED_PROPERTIES")
    _bound(ctx, "maxProperties", "MAX_PROPERTIES", o.raw.get("maxProperties"), u.raw.get("maxProperties"))
    _bound(ctx, "minProperties", "MIN_PROPERTIES", o.raw.get("minProperties"), u.raw.get("minProperties"))


def _dependencies(ctx: _Ctx, o: _View, u: _View) -> None:
    """dependencies (dependentRequired/dependentSchemas in 2019-09+): arrays of names, or schemas."""
    def split(view: _View) -> tuple[dict[str, set[str]], dict[str, Any]]:
        arrays: dict[str, set[str]] = {k: set(v) for k, v in (view.raw.get("dependentRequired") or {}).items()}
        schemas: dict[str, Any] = dict(view.raw.get("dependentSchemas") or {})
        for key, value in (view.raw.get("dependencies") or {}).items():
            if isinstance(value, list):
                arrays[key] = set(value)
            else:
                schemas[key] = value
        return arrays, schemas

    (oarr, osch), (uarr, usch) = split(o), split(u)
    if not (oarr or osch or uarr or usch):
        return
    ctx.enter("dependencies")
    for key in [*oarr, *(k for k in uarr if k not in oarr)]:
        ctx.enter(key)
        if key not in uarr:
            ctx.add("DEPENDENCY_ARRAY_REMOVED")
        elif key not in oarr:
            ctx.add("DEPENDENCY_ARRAY_ADDED")
        elif oarr[key] != uarr[key]:
            ctx.add("DEPENDENCY_ARRAY_EXTENDED" if uarr[key] >= oarr[key] else
                    "DEPENDENCY_ARRAY_NARROWED" if oarr[key] >= uarr[key] else "DEPENDENCY_ARRAY_CHANGED")
        ctx.leave()
    for key in [*osch, *(k for k in usch if k not in osch)]:
        ctx.enter(key)
        if key not in usch:
            ctx.add("DEPENDENCY_SCHEMA_REMOVED")
        elif key not in osch:
            ctx.add("DEPENDENCY_SCHEMA_ADDED")
        else:
            _compare(ctx, o.child(osch[key]), u.child(usch[key]))
        ctx.leave()
    ctx.leave()


def _property_removed(ctx: _Ctx, old: _View, update: _View, name: str) -> None:
    if _open(update):
        ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = _partial(update, name)
    if partial is not None:
        sub = ctx.sub()
        _compare(sub, old, partial)
        ctx.diffs += sub.diffs
        ctx.add("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                else "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif old.kind == "false":
        ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _property_added(ctx: _Ctx, original: _View, new: _View, update: _View, required: bool) -> None:
    if _open(original):
        if new.kind == "empty":
            ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
        elif required:
            ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL" if new.has_default()
                    else "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
        else:
            ctx.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
        return
    partial = _partial(original, ctx.path[-1])
    if partial is not None:
        sub = ctx.sub()
        _compare(sub, partial, new)
        ctx.diffs += sub.diffs
        ctx.add("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    if required:
        ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL" if new.has_default()
                else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
    else:
        ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")


def _open(view: _View) -> bool:
    """ObjectSchemaDiff.isOpenContentModel: additionalProperties absent or true, no patternProperties, and
    unevaluatedProperties absent or true."""
    additional = view.raw.get("additionalProperties", True)
    unevaluated = view.raw.get("unevaluatedProperties", True)
    return additional is True and not view.raw.get("patternProperties") and unevaluated in (True, {})


def _partial(view: _View, name: str) -> _View | None:
    """The schema a partially open content model gives an undeclared property (pattern, additional, unevaluated)."""
    for pattern, schema in (view.raw.get("patternProperties") or {}).items():
        try:
            if re.search(pattern, name):
                return view.child(schema)
        except re.error:
            continue
    additional = view.raw.get("additionalProperties", True)
    if isinstance(additional, dict):
        return view.child(additional)
    if additional is True:
        unevaluated = view.raw.get("unevaluatedProperties")
        if isinstance(unevaluated, dict) and unevaluated:
            return view.child(unevaluated)
    return None


def _additional(ctx: _Ctx, o: _View, u: _View, key: str, prefix: str) -> None:
    """additionalProperties / additionalItems: permitted or not, and their schema."""
    ctx.enter(key)
    ov, uv = o.raw.get(key, True), u.raw.get(key, True)
    if (ov is not False) != (uv is not False):
        ctx.add(f"{prefix}_ADDED" if uv is not False else f"{prefix}_REMOVED")
    elif not isinstance(ov, dict) and isinstance(uv, dict):
        ctx.add(f"{prefix}_NARROWED")
    elif isinstance(ov, dict) and not isinstance(uv, dict):
        ctx.add(f"{prefix}_EXTENDED")
    elif isinstance(ov, dict) and isinstance(uv, dict):
        _compare(ctx, o.child(ov), u.child(uv))
    ctx.leave()


def _tuple(view: _View) -> list[Any] | None:
    """The tuple's item schemas: prefixItems (2020-12) or an items array (earlier drafts)."""
    if isinstance(view.raw.get("prefixItems"), list):
        return list(view.raw["prefixItems"])
    return list(view.raw["items"]) if isinstance(view.raw.get("items"), list) else None


def _all_items(view: _View) -> Any:
    """The schema of every item (items as a schema, when there is no tuple)."""
    items = view.raw.get("items")
    return items if _tuple(view) is None and isinstance(items, dict) else None


def _additional_items(view: _View) -> Any:
    """additionalItems, or items beside prefixItems or as a boolean (as everit loads 2020-12): True when absent."""
    items = view.raw.get("items")
    if isinstance(view.raw.get("prefixItems"), list) or (isinstance(items, bool) and "additionalItems" not in view.raw):
        return view.raw.get("items", True)
    return view.raw.get("additionalItems", True)


def _items_open(view: _View) -> bool:
    """ArraySchemaDiff.isOpenContentModel: extra items allowed and unconstrained."""
    return _additional_items(view) is True and view.raw.get("unevaluatedItems", True) in (True, {})


def _items_partial(view: _View) -> _View | None:
    extra = _additional_items(view)
    if isinstance(extra, dict):
        return view.child(extra)
    unevaluated = view.raw.get("unevaluatedItems")
    if extra is True and isinstance(unevaluated, dict) and unevaluated:
        return view.child(unevaluated)
    return None


def _array(ctx: _Ctx, o: _View, u: _View) -> None:
    oa, ua = _all_items(o), _all_items(u)
    if oa is not None or ua is not None:
        ctx.enter("items")
        _compare(ctx, None if oa is None else o.child(oa), None if ua is None else u.child(ua))
        ctx.leave()
    _tuple_items(ctx, o, u, _tuple(o) or [], _tuple(u) or [])
    _additional_items_diff(ctx, o, u)
    _unevaluated(ctx, o, u, "unevaluatedItems", "UNEVALUATED_ITEMS")
    _bound(ctx, "maxItems", "MAX_ITEMS", o.raw.get("maxItems"), u.raw.get("maxItems"))
    _bound(ctx, "minItems", "MIN_ITEMS", o.raw.get("minItems"), u.raw.get("minItems"))
    if bool(o.raw.get("uniqueItems")) != bool(u.raw.get("uniqueItems")):
        ctx.add("UNIQUE_ITEMS_REMOVED" if o.raw.get("uniqueItems") else "UNIQUE_ITEMS_ADDED", "uniqueItems")
    _bound(ctx, "maxContains", "MAX_CONTAINS", o.raw.get("maxContains"), u.raw.get("maxContains"))
    _bound(ctx, "minContains", "MIN_CONTAINS", o.raw.get("minContains"), u.raw.get("minContains"))


def _additional_items_diff(ctx: _Ctx, o: _View, u: _View) -> None:
    ctx.enter("additionalItems")
    ov, uv = _additional_items(o), _additional_items(u)
    if (ov is not False) != (uv is not False):
        ctx.add("ADDITIONAL_ITEMS_REMOVED" if ov is not False else "ADDITIONAL_ITEMS_ADDED")
    elif not isinstance(ov, dict) and isinstance(uv, dict):
        ctx.add("ADDITIONAL_ITEMS_NARROWED")
    elif isinstance(ov, dict) and not isinstance(uv, dict):
        ctx.add("ADDITIONAL_ITEMS_EXTENDED")
    elif isinstance(ov, dict) and isinstance(uv, dict):
        _compare(ctx, o.child(ov), u.child(uv))
    ctx.leave()


def _unevaluated(ctx: _Ctx, o: _View, u: _View, key: str, prefix: str) -> None:
    """unevaluatedProperties / unevaluatedItems (ObjectSchemaDiff/ArraySchemaDiff.compareUnevaluated*)."""
    ov, uv = o.raw.get(key), u.raw.get(key)
    if ov is None and uv is None:
        return
    ctx.enter(key)
    if ov is None:
        ctx.add(f"{prefix}_REMOVED" if uv is False else f"{prefix}_NARROWED")
    elif uv is None:
        ctx.add(f"{prefix}_ADDED" if ov is False else f"{prefix}_EXTENDED")
    elif ov is False and uv is not False:
        ctx.add(f"{prefix}_ADDED")
    elif ov is not False and uv is False:
        ctx.add(f"{prefix}_REMOVED")
    elif ov in (True, {}) and uv not in (True, {}):
        ctx.add(f"{prefix}_NARROWED")
    elif ov not in (True, {}) and uv in (True, {}):
        ctx.add(f"{prefix}_EXTENDED")
    else:
        _compare(ctx, o.child(ov), u.child(uv))
    ctx.leave()


def _tuple_items(ctx: _Ctx, o: _View, u: _View, olds: list[Any], news: list[Any]) -> None:
    for i in range(max(len(olds), len(news))):
        ctx.enter(f"items/{i}")
        if i < len(olds) and i < len(news):
            _compare(ctx, o.child(olds[i]), u.child(news[i]))
        elif i < len(olds):  # the update has fewer items
            partial = _items_partial(u)
            if _items_open(u):
                ctx.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
            elif partial is not None:
                sub = ctx.sub()
                _compare(sub, o.child(olds[i]), partial)
                ctx.diffs += sub.diffs
                ctx.add("ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                        else "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
            elif olds[i] is False:
                ctx.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
            else:
                ctx.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        else:  # the update has more items
            new = u.child(news[i])
            partial = _items_partial(o)
            if _items_open(o):
                ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL" if new.kind == "empty"
                        else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
            elif partial is not None:
                sub = ctx.sub()
                _compare(sub, partial, new)
                ctx.diffs += sub.diffs
                ctx.add("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                        else "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
            else:
                ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")
        ctx.leave()


_BY_KIND = {"string": _string, "number": _number, "enum": _enum, "const": _const, "not": _not,
            "combined": _combined, "object": _object, "array": _array}


# --- messages ---------------------------------------------------------------------------------------------

_KEYWORD_ADDED_OR_REMOVED = frozenset({
    "MAXIMUM_ADDED", "MINIMUM_ADDED", "EXCLUSIVE_MAXIMUM_ADDED", "EXCLUSIVE_MINIMUM_ADDED", "MULTIPLE_OF_ADDED",
    "MAX_LENGTH_ADDED", "MIN_LENGTH_ADDED", "PATTERN_ADDED", "REQUIRED_ATTRIBUTE_ADDED", "MAX_PROPERTIES_ADDED",
    "MIN_PROPERTIES_ADDED", "DEPENDENCY_ARRAY_ADDED", "DEPENDENCY_SCHEMA_ADDED", "MAX_ITEMS_ADDED", "MIN_ITEMS_ADDED",
    "MAX_CONTAINS_ADDED", "MIN_CONTAINS_ADDED", "UNIQUE_ITEMS_ADDED", "ADDITIONAL_ITEMS_REMOVED",
    "ADDITIONAL_PROPERTIES_REMOVED", "UNEVALUATED_PROPERTIES_REMOVED", "UNEVALUATED_ITEMS_REMOVED",
})
_VALUE_INCREASED = frozenset({"MIN_LENGTH_INCREASED", "MINIMUM_INCREASED", "EXCLUSIVE_MINIMUM_INCREASED",
                              "MIN_PROPERTIES_INCREASED", "MULTIPLE_OF_EXPANDED", "MIN_ITEMS_INCREASED",
                              "MIN_CONTAINS_INCREASED"})
_VALUE_DECREASED = frozenset({"MAX_LENGTH_DECREASED", "MAXIMUM_DECREASED", "MAX_ITEMS_DECREASED",
                              "MAX_CONTAINS_DECREASED", "EXCLUSIVE_MAXIMUM_DECREASED", "MAX_PROPERTIES_DECREASED"})
_TYPE_NARROWED = frozenset({"ADDITIONAL_ITEMS_NARROWED", "ENUM_ARRAY_NARROWED", "SUM_TYPE_NARROWED",
                            "ADDITIONAL_PROPERTIES_NARROWED", "UNEVALUATED_PROPERTIES_NARROWED",
                            "UNEVALUATED_ITEMS_NARROWED"})
_VALUE_CHANGED = frozenset({"PATTERN_CHANGED", "MULTIPLE_OF_CHANGED", "DEPENDENCY_ARRAY_CHANGED"})
_TYPE_CHANGED = frozenset({"TYPE_CHANGED", "TYPE_NARROWED", "COMBINED_TYPE_CHANGED", "COMBINED_TYPE_SUBSCHEMAS_CHANGED",
                           "ENUM_ARRAY_CHANGED"})
_TYPE_EXTENDED = frozenset({"DEPENDENCY_ARRAY_EXTENDED", "PRODUCT_TYPE_EXTENDED", "SUM_TYPE_EXTENDED",
                            "NOT_TYPE_EXTENDED"})
_ADDED_TO_OPEN = frozenset({"REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
                            "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL",
                            "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"})


def _description(kind: str, path: str, reader: str, writer: str) -> str:
    """Confluent's json.diff.Difference.error() with the reader/writer labels filled in."""
    if kind in _KEYWORD_ADDED_OR_REMOVED:
        return f"The keyword at path '{path}' in the {reader} schema is not present in the {writer} schema"
    if kind in _VALUE_INCREASED:
        return f"The value at path '{path}' in the {reader} schema is more than its value in the {writer} schema"
    if kind in _VALUE_DECREASED:
        return f"The value at path '{path}' in the {reader} schema is less than its value in the {writer} schema"
    if kind in _VALUE_CHANGED:
        return f"The value at path '{path}' is different between the {reader} and {writer} schema"
    if kind in _TYPE_NARROWED:
        return (f"An array or combined type at path '{path}' has fewer elements in the {reader} schema than the "
                f"{writer} schema")
    if kind in _TYPE_EXTENDED:
        return (f"An array or combined type at path '{path}' has more elements in the {reader} schema than the "
                f"{writer} schema")
    if kind in _TYPE_CHANGED:
        return f"A type at path '{path}' is different between the {reader} schema and the {writer} schema"
    if kind in _ADDED_TO_OPEN:
        return (f"The {reader} schema has an open content model and has a property or item at path '{path}' which "
                f"is missing in the {writer} schema")
    if kind == "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL":
        return (f"The {reader} schema has an unopen content model and has a required property at path '{path}' "
                f"which is missing in the {writer} schema")
    if kind in ("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"):
        return (f"The {reader} has a closed content model and is missing a property or item present at path "
                f"'{path}' in the {writer} schema")
    if kind in ("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"):
        return (f"A property or item is missing in the {reader} schema but present at path '{path}' in the "
                f"{writer} schema and is not covered by its partially open content model")
    if kind in ("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"):
        return (f"The {reader} schema has a property or item at path '{path}' which is missing in the {writer} "
                f"schema and is not covered by its partially open content model")
    return ""


def differences(original: JsonSchema, update: JsonSchema) -> list[tuple[str, str]]:
    """Every (Difference type, JSON path) from `original` to `update`, compatible ones included."""
    ctx = _Ctx()
    _compare(ctx, _view(original.raw, original.resolver), _view(update.raw, update.resolver))
    return ctx.diffs


def reader_writer_incompatibilities(reader: Any, writer: Any, reader_label: str, writer_label: str) -> list[str]:
    """JsonSchema.isBackwardCompatible: the reader is the update, the writer the original."""
    assert isinstance(reader, JsonSchema) and isinstance(writer, JsonSchema)
    return [
        # Confluent's Difference.toString closes the description with a single quote: kept as clients see it
        f'{{errorType:"{kind}", description:"{_description(kind, path, reader_label, writer_label)}\'}}'
        for kind, path in differences(writer, reader)
        if kind not in COMPATIBLE_CHANGES
    ]
