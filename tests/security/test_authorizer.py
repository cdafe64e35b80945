"""StandardAuthorizer semantics and the durable ACL store (Kafka's AclBindingFilter matching rules)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidelog.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from tidelog.security.acl_store import AclBinding, AclBindingFilter, AclStore, validate_new_acl
from tidelog.security.authorizer import StandardAuthorizer

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(rt: ResourceType, name: str, op: AclOperation, perm: AclPermissionType = ALLOW,
        principal: str = "User:alice", host: str = "*", pattern: PatternType = LIT) -> AclBinding:
    return AclBinding(rt, name, pattern, principal, host, op, perm)


def authorizer(tmp_path: Path, acls: list[AclBinding], supers: tuple[str, ...] = (),
               allow_if_none: bool = False) -> StandardAuthorizer:
    store = AclStore(tmp_path)
    store.create(acls)
    return StandardAuthorizer(store, supers, allow_if_none)


def test_no_acl_denies_unless_allow_everyone(tmp_path: Path) -> None:
    assert not authorizer(tmp_path, []).authorize("User:alice", "1.2.3.4", Op.READ, T, "t")
    assert authorizer(tmp_path / "b", [], allow_if_none=True).authorize("User:alice", "1.2.3.4", Op.READ, T, "t")
    # an ACL on the resource for someone else: "found ACLs", so allow.everyone no longer applies
    a = authorizer(tmp_path / "c", [acl(T, "t", Op.READ, principal="User:bob")], allow_if_none=True)
    assert not a.authorize("User:alice", "h", Op.READ, T, "t")
    assert a.authorize("User:alice", "h", Op.READ, T, "other")


def test_super_users_are_allowed_everything(tmp_path: Path) -> None:
    a = authorizer(tmp_path, [acl(T, "t", Op.ALL, DENY, principal="User:*")], supers=("User:admin",))
    assert a.authorize("User:admin", "h", Op.DELETE, T, "t")
    assert not a.authorize("User:alice", "h", Op.READ, T, "t")


def test_deny_wins_and_implied_operations(tmp_path: Path) -> None:
    a = authorizer(tmp_path, [
        acl(T, "t", Op.READ), acl(T, "t", Op.WRITE, DENY),
        acl(T, "cfg", Op.ALTER_CONFIGS), acl(G, "g", Op.DELETE),
    ])
    assert a.authorize("User:alice", "h", Op.READ, T, "t")
    assert a.authorize("User:alice", "h", Op.DESCRIBE, T, "t")  # READ implies DESCRIBE
    assert not a.authorize("User:alice", "h", Op.WRITE, T, "t")
    assert a.authorize("User:alice", "h", Op.DESCRIBE_CONFIGS, T, "cfg")  # ALTER_CONFIGS implies it
    assert not a.authorize("User:alice", "h", Op.DESCRIBE, T, "cfg")
    assert a.authorize("User:alice", "h", Op.DESCRIBE, G, "g")  # DELETE implies DESCRIBE
    assert not a.authorize("User:alice", "h", Op.READ, G, "g")
    # a DENY of READ does not deny DESCRIBE (implications only widen ALLOW rules)
    b = authorizer(tmp_path / "b", [acl(T, "t", Op.ALL), acl(T, "t", Op.READ, DENY)])
    assert b.authorize("User:alice", "h", Op.DESCRIBE, T, "t")
    assert not b.authorize("User:alice", "h", Op.READ, T, "t")


def test_prefixed_wildcard_principal_and_host(tmp_path: Path) -> None:
    a = authorizer(tmp_path, [
        acl(T, "orders-", Op.WRITE, pattern=PRE),
        acl(T, "*", Op.DESCRIBE, principal="User:*"),
        acl(T, "orders-secret", Op.WRITE, DENY),
        acl(G, "app", Op.READ, host="10.0.0.1"),
    ])
    assert a.authorize("User:alice", "h", Op.WRITE, T, "orders-eu")
    assert not a.authorize("User:alice", "h", Op.WRITE, T, "orders")
    assert not a.authorize("User:alice", "h", Op.WRITE, T, "orders-secret")
    assert a.authorize("User:carol", "h", Op.DESCRIBE, T, "anything")
    assert a.authorize("User:alice", "10.0.0.1", Op.READ, G, "app")
    assert not a.authorize("User:alice", "10.0.0.2", Op.READ, G, "app")


def test_authorize_by_resource_type(tmp_path: Path) -> None:
    a = authorizer(tmp_path, [acl(T, "a-", Op.WRITE, pattern=PRE), acl(T, "a-", Op.WRITE, DENY, pattern=PRE,
                                                                        principal="User:bob")])
    assert a.authorize_by_resource_type("User:alice", "h", Op.WRITE, T)
    assert not a.authorize_by_resource_type("User:bob", "h", Op.WRITE, T)
    assert not a.authorize_by_resource_type("User:carol", "h", Op.WRITE, T)
    b = authorizer(tmp_path / "b", [acl(T, "x", Op.WRITE), acl(T, "*", Op.WRITE, DENY)])
    assert not b.authorize_by_resource_type("User:alice", "h", Op.WRITE, T)


def test_filters_match_like_kafka(tmp_path: Path) -> None:
    lit = acl(T, "orders", Op.READ)
    pre = acl(T, "ord", Op.READ, pattern=PRE)
    wild = acl(T, "*", Op.READ)
    grp = acl(G, "orders", Op.READ)

    def f(rt: int, name: str | None, pt: int, principal: str | None = None, op: int = 1, perm: int = 1) -> AclBindingFilter:
        return AclBindingFilter.from_codes(rt, name, pt, principal, None, op, perm)

    assert {a for a in (lit, pre, wild, grp) if f(1, None, 1).matches(a)} == {lit, pre, wild, grp}
    assert {a for a in (lit, pre, wild, grp) if f(2, "orders", 2).matches(a)} == {lit, pre, wild}  # MATCH
    assert {a for a in (lit, pre, wild, grp) if f(2, "orders", 3).matches(a)} == {lit}  # LITERAL
    assert {a for a in (lit, pre, wild, grp) if f(2, "ord", 4).matches(a)} == {pre}  # PREFIXED
    assert {a for a in (lit, pre, wild, grp) if f(1, "orders", 1).matches(a)} == {lit, grp}  # ANY: exact name
    assert not f(2, None, 1, principal="User:bob").matches(lit)
    assert not f(2, None, 1, op=int(Op.WRITE)).matches(lit)
    assert f(2, None, 1, perm=int(ALLOW)).matches(lit)
    assert f(0, None, 1).find_indefinite_field() is not None


@pytest.mark.parametrize(("binding", "problem"), [
    (acl(C, "other", Op.ALTER), "CLUSTER"),
    (acl(T, "", Op.READ), "empty"),
    (acl(T, "*", Op.READ, pattern=PRE), "Wildcard"),
    (AclBinding(T, "t", LIT, "alice", "*", Op.READ, ALLOW), "principal"),
    (AclBinding(T, "t", PatternType.MATCH, "User:a", "*", Op.READ, ALLOW), "patternType"),
    (AclBinding(T, "t", LIT, "User:a", "*", Op.ANY, ALLOW), "operation"),
])
def test_validate_new_acl(binding: AclBinding, problem: str) -> None:
    message = validate_new_acl(binding)
    assert message is not None and problem in message


def test_store_is_durable_and_reindexes(tmp_path: Path) -> None:
    store = AclStore(tmp_path)
    a = StandardAuthorizer(store, (), False)
    store.create([acl(T, "t", Op.READ), acl(T, "t", Op.READ)])  # duplicates collapse
    assert len(store.acls()) == 1
    assert a.authorize("User:alice", "h", Op.READ, T, "t")
    again = AclStore(tmp_path)
    assert again.acls() == store.acls()
    removed = store.delete([AclBindingFilter.from_codes(2, "t", 3, None, None, 1, 1)])
    assert removed == [[acl(T, "t", Op.READ)]]
    assert not a.authorize("User:alice", "h", Op.READ, T, "t")
    assert AclStore(tmp_path).acls() == []
    assert (tmp_path / "tidelog-acls.json").stat().st_mode & 0o077 == 0
