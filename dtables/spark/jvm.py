"""Classes, static members and Scala objects of the driver's JVM, each looked up once per gateway.

py4j resolves ``spark._jvm.org.apache.x.C`` one dotted step at a time, and ``C.member`` once more: each step is a
round trip in which the JVM tries to load a class of that name (a failed try searches every jar on the class path).
On the 2-core benchmark machine a resolved step costs 0.3-0.5 ms against 0.17 ms for a call on an object already
held, and a warm one-row refresh made about 200 of them (bench/README.md, "py4j's name lookups"). The objects these
lookups return are plain references (a class, a method of it, a Scala object's instance), valid for the gateway's
life and usable from any thread, so they are kept here per gateway client.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from py4j.java_gateway import JavaClass

_found: WeakKeyDictionary[Any, dict[tuple[str, str], Any]] = WeakKeyDictionary()


def _client(spark: Any) -> Any:
    return spark._jvm._gateway_client


def _cached(spark: Any, key: tuple[str, str], find: Any) -> Any:
    client = _client(spark)
    known = _found.get(client)
    if known is None:
        known = _found[client] = {}
    value = known.get(key)
    if value is None:
        value = known[key] = find(client)
    return value


def jvm_class(spark: Any, name: str) -> Any:
    """The JVM class of fully qualified ``name`` (``java.util.ArrayList``; nested: ``a.B$C``): call it to construct."""
    return _cached(spark, (name, ""), lambda client: JavaClass(name, client))


def static(spark: Any, name: str, member: str) -> Any:
    """A static method (call it) or static field's value of class ``name``: an enum constant, a Scala object's
    ``MODULE$``."""
    return _cached(spark, (name, member), lambda client: getattr(jvm_class(spark, name), member))


def scala_object(spark: Any, name: str) -> Any:
    """The instance of Scala object ``name`` (``scala.None``, a companion object such as Delta's ``Action``)."""
    return static(spark, f"{name}$", "MODULE$")
