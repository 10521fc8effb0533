"""How skein's Java AM is started in its container: with a class-data-sharing archive of the classes it loads.

The AM's JVM loads a few thousand classes (Hadoop's YARN and HDFS clients, gRPC, Netty) before our Python AM
can begin; that was the largest phase of a short job (bench/launch_timeline.py: ~2.4 s of ~6.3 s). JDK 17's
dynamic AppCDS (`-XX:ArchiveClassesAtExit`, then `-XX:SharedArchiveFile`) maps them ready-parsed instead:
~0.9 s sooner per AM, measured on the local cluster (issue #54).

The JVM accepts an archive only for the class path it was made with, jar by jar (path, size, mtime), and the
localized skein.jar's mtime differs from node to node: so the archive is made where it is used. The first AM
of a user on a node writes it at its exit (inside its own container directory, so a killed AM leaves no
torn file behind), and a whole copy is renamed into `<NodeManager local dir>/usercache/<user>/
tony-airflow-cds/` beside the NodeManager's cache of that user's files; every later AM of that user there
maps it. Its name is a checksum of what the JVM checks (every class-path jar's path, size and mtime, the java
binary and libjvm.so), so an upgraded Hadoop, JDK or skein makes a new one; one not remade for a day is removed
when another is made. An archive the JVM still refuses costs only the gain (the JVM starts as without it).
Only a JDK 13 or later (its `release` file says) gets the options: an older JVM would refuse to start on them.
When the archive is mapped (or not used), the script `exec`s java: the container's process is java, as before.
`TONY_AM_CDS=0` in the AM's environment turns it off.
"""

from __future__ import annotations

SCRIPT_NAME = ".tony-am.sh"
ARCHIVE_DIR = "tony-airflow-cds"
DISABLE_ENV = "TONY_AM_CDS"  # "0": skein's AM starts without an archive

# $1: the java binary; the rest: the JVM's arguments. Exits with java's exit code.
SCRIPT = r"""# skein's Java AM with a class-data-sharing archive (tony_airflow/yarn/am_launch.py)
java=$1; shift
home="${java%/bin/java}"
made="$PWD/.skein-am.jsa"
user_dir="${PWD%/appcache/*}"
cds=()
major=0
if [ -r "$home/release" ]; then  # JDK 13 and later only: an older JVM refuses to start on the options
  version=$(sed -n 's/^JAVA_VERSION="\([0-9.]*\).*/\1/p' "$home/release")
  major=${version%%.*}
  [ "$major" = 1 ] && major=$(echo "$version" | cut -d. -f2)
  case "$major" in ''|*[!0-9]*) major=0 ;; esac
fi
if [ "${TONY_AM_CDS:-1}" != 0 ] && [ "$major" -ge 13 ] && [ "$user_dir" != "$PWD" ]; then
  dir="$user_dir/tony-airflow-cds"
  if mkdir -p "$dir" 2>/dev/null && [ -O "$dir" ] && chmod 700 "$dir" 2>/dev/null; then
    key=$(
      shopt -s dotglob nullglob
      IFS=: read -r -a entries <<< "${CLASSPATH:-}"
      {
        stat -L -c '%n %s %Y' "$java" "$home/lib/server/libjvm.so" 2>/dev/null
        for entry in "${entries[@]}"; do
          case "$entry" in
            */\*|\*) stat -L -c '%n %s %Y' "${entry%\*}"*.jar "${entry%\*}"*.JAR 2>/dev/null ;;
            ?*) stat -L -c '%n %s %Y' "$entry" 2>/dev/null ;;
          esac
        done
      } | cksum | tr ' ' -)
    jsa="$dir/skein-am-$key.jsa"
    if [ -f "$jsa" ] && [ -O "$jsa" ]; then
      cds=("-XX:SharedArchiveFile=$jsa")
    else
      cds=("-XX:ArchiveClassesAtExit=$made")
    fi
  fi
fi
if [ "${cds[0]:-}" != "-XX:ArchiveClassesAtExit=$made" ]; then
  exec "$java" "${cds[@]}" "$@"  # java is the container's process, as without this script
fi
"$java" "${cds[@]}" "$@"
rc=$?
if [ "$rc" -eq 0 ] && [ -s "$made" ] && tmp=$(mktemp "$dir/.skein-am.XXXXXX" 2>/dev/null); then
  if cp "$made" "$tmp" 2>/dev/null && chmod 600 "$tmp" && mv -f "$tmp" "$jsa"; then
    # an archive of other jars, not remade for a day (another Hadoop, JDK or skein on this node): gone
    find "$dir" -maxdepth 1 -name 'skein-am-*.jsa' ! -name "${jsa##*/}" -mtime +0 -delete 2>/dev/null
  else
    rm -f "$tmp"
  fi
fi
rm -f "$made"
exit "$rc"
"""


def command(java: str, jvm_args: str, log: str) -> str:
    """The AM container's command: the script (a local resource named SCRIPT_NAME) starts `java jvm_args`,
    its output going to `log`."""
    return f"bash {SCRIPT_NAME} {java} {jvm_args} >{log} 2>&1"
