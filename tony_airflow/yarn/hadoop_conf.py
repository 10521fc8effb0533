"""Reading a Hadoop configuration directory (core-, hdfs-, yarn-site.xml).

The project uses whatever cluster HADOOP_CONF_DIR points at; the local cluster
is only the default when it is unset.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

SITE_FILES = ("core-site.xml", "hdfs-site.xml", "yarn-site.xml")


def is_kerberos(authentication: str | None) -> bool:
    """`hadoop.security.authentication` says Kerberos (unset: simple)."""
    return (authentication or "simple").strip().lower() == "kerberos"


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
        return self.props.get(key, default)

    @property
    def kerberos(self) -> bool:
        return is_kerberos(self.props.get("hadoop.security.authentication"))

    def rm_web_addresses(self) -> list[str]:
        """`http://host:port` of every ResourceManager (several under HA)."""
        ids = [i.strip() for i in self.props.get("yarn.resourcemanager.ha.rm-ids", "").split(",") if i.strip()]
        if self.props.get("yarn.resourcemanager.ha.enabled", "false") == "true" and ids:
            addrs = [self.props.get(f"yarn.resourcemanager.webapp.address.{i}") for i in ids]
            return [f"http://{a}" for a in addrs if a]
        addr = self.props.get("yarn.resourcemanager.webapp.address")
        if not addr:
            host = self.props.get("yarn.resourcemanager.hostname", "0.0.0.0")
            addr = f"{host}:8088"
        return [f"http://{addr}"]

    def namenode_web_address(self) -> str:
        """`http://host:port` of the NameNode's HTTP server (WebHDFS)."""
        addr = self.props.get("dfs.namenode.http-address", "0.0.0.0:9870")
        return f"http://{addr}"
