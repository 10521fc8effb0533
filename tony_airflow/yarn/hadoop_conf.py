"""Reading a Hadoop configuration directory (core-, hdfs-, yarn-site.xml).

The project uses whatever cluster HADOOP_CONF_DIR points at; the local cluster
is only the default when it is unset.
"""

from __future__ import annotations

import getpass
import os
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

SITE_FILES = ("core-site.xml", "hdfs-site.xml", "yarn-site.xml")
MAX_SUBST = 20  # Configuration.MAX_SUBST: deeper than this is an error in Hadoop, left as it is here
# What `${name}` may name besides another key: the Java system properties a site file can meet
JAVA_PROPERTIES = {"user.name": getpass.getuser, "user.home": lambda: str(Path.home()),
                   "java.io.tmpdir": lambda: "/tmp"}


def is_kerberos(authentication: str | None) -> bool:
    """`hadoop.security.authentication` says Kerberos (unset: simple)."""
    return (authentication or "simple").strip().lower() == "kerberos"


def _variable(text: str, start: int) -> tuple[int, int] | None:
    """The span of the next `${name}` at or after `start` (Configuration.findSubVariable: a name is
    non-empty and has no space and no `$`)."""
    while True:
        left = text.find("${", start)
        if left < 0:
            return None
        end = left + 2
        while end < len(text) and text[end] not in "} $":
            end += 1
        if end < len(text) and text[end] == "}" and end > left + 2:
            return left, end + 1
        start = left + 1


def expand(value: str, props: Mapping[str, str], environ: Mapping[str, str] | None = None) -> str:
    """Hadoop's `${…}` substitution (Configuration.substituteVars): `${env.NAME}`, `${env.NAME:-default}`
    and `${env.NAME-default}` from the environment, `${user.name}` and the like from Java's properties,
    else another key; an unbound name stays literal, a self-reference returns the value unexpanded."""
    environ = os.environ if environ is None else environ
    result, start = value, 0
    for _ in range(MAX_SUBST):
        span = _variable(result, start)
        if span is None:
            return result
        name = result[span[0] + 2:span[1] - 1]
        found = _lookup(name, props, environ)
        if found is None:
            return result  # Hadoop stops at the first unbound variable
        if result[span[0]:span[1]] in found:
            return value  # a loop
        result = result[:span[0]] + found + result[span[1]:]
    return result


def _lookup(name: str, props: Mapping[str, str], environ: Mapping[str, str]) -> str | None:
    if name.startswith("env.") and len(name) > 4:
        var = name[4:]
        for i, char in enumerate(var):
            if char == ":" and var[i + 1:i + 2] == "-":
                return environ.get(var[:i]) or var[i + 2:]
            if char == "-":
                got = environ.get(var[:i])
                return var[i + 1:] if got is None else got
        return environ.get(var)
    if name in JAVA_PROPERTIES:
        return JAVA_PROPERTIES[name]()
    return props.get(name)


def read_site(path: Path) -> dict[str, str]:
    """The name -> value pairs of one *-site.xml file."""
    props: dict[str, str] = {}
    if not path.exists():
        return props
    for prop in ET.parse(path).getroot().iter("property"):
        name, value = prop.findtext("name"), prop.findtext("value")
        if name:
            props[name.strip()] = (value or "").strip()
    return props


def write_site(path: Path, props: dict[str, object]) -> None:
    """Write name -> value pairs as a Hadoop *-site.xml file."""
    root = ET.Element("configuration")
    for name, value in props.items():
        prop = ET.SubElement(root, "property")
        ET.SubElement(prop, "name").text = name
        ET.SubElement(prop, "value").text = str(value).lower() if isinstance(value, bool) else str(value)
    ET.indent(root)
    path.write_text('<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n")


@dataclass
class HadoopConf:
    """The merged site files of one configuration directory."""

    conf_dir: Path
    props: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, conf_dir: str | Path) -> HadoopConf:
        conf_dir = Path(conf_dir)
        props: dict[str, str] = {}
        for name in SITE_FILES:
            props.update(read_site(conf_dir / name))
        return cls(conf_dir=conf_dir, props=props)

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value of `key` with `${…}` expanded as Hadoop does; `default` when it is unset."""
        value = self.props.get(key)
        return default if value is None else expand(value, self.props)

    @property
    def kerberos(self) -> bool:
        return is_kerberos(self.props.get("hadoop.security.authentication"))

    def rm_web_addresses(self) -> list[str]:
        """`http(s)://host:port` of every ResourceManager (several under HA), by Hadoop's rules."""
        from tony_airflow.yarn.hadoop_addresses import rm_web_addresses

        return rm_web_addresses(self)

    def namenode_web_addresses(self, uri: str | None = None) -> list[str]:
        """`http(s)://host:port` of every NameNode serving `uri`'s authority (the default FS's when None)."""
        from tony_airflow.yarn.hadoop_addresses import namenodes

        return list(namenodes(self, uri).web)

    def namenode_web_address(self) -> str:
        """The first NameNode of the default filesystem (the only one without HA)."""
        return self.namenode_web_addresses()[0]
