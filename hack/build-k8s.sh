#!/usr/bin/env bash
# Builds kube-apiserver and etcd for envtest, or the binaries named as arguments (etcd,
# kube-apiserver, kubectl), from the pinned tools modules under hack/tools into bin/k8s. Nothing
# is downloaded but Go modules. A binary is rebuilt only when it is missing or when its tools
# module (go.mod/go.sum) changed since it was built.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/bin/k8s"
mkdir -p "$out"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly

# stamp prints a fingerprint of a tools module's pinned versions.
stamp() { cat "$root/hack/tools/$1/go.mod" "$root/hack/tools/$1/go.sum" | sha256sum | cut -c1-16; }

# build NAME PACKAGE [LDFLAGS]: builds PACKAGE from hack/tools/NAME into bin/k8s/NAME.
build() {
  local name=$1 pkg=$2 ldflags=${3:-}
  local want; want=$(stamp "$name")
  if [[ -x "$out/$name" && "$(cat "$out/.$name.stamp" 2>/dev/null)" == "$want" ]]; then
    return
  fi
  echo "Building $name from $pkg (first build takes several minutes)" >&2
  local start=$SECONDS
  # A temporary of this process's own: suites started together may build at once, and the last
  # rename wins whole.
  local tmp="$out/$name.tmp.$$"
  (cd "$root/hack/tools/$name" && go build -trimpath -ldflags "-s -w $ldflags" -o "$tmp" "$pkg")
  mv "$tmp" "$out/$name"
  echo "$want" > "$out/.$name.stamp"
  echo "Built $name in $((SECONDS - start))s" >&2
}

k8s_version=$(cd "$root/hack/tools/kube-apiserver" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
major=$(echo "${k8s_version#v}" | cut -d. -f1)
minor=$(echo "${k8s_version#v}" | cut -d. -f2)
version_flags=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  version_flags+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=$major -X $p.gitMinor=$minor"
  version_flags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

# Every suite runs this for etcd and kube-apiserver; kubectl only the runbook specs need.
(($#)) || set -- etcd kube-apiserver
for name in "$@"; do
  case $name in
  etcd) build etcd go.etcd.io/etcd/server/v3 ;;
  kube-apiserver) build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$version_flags" ;;
  kubectl) build kubectl k8s.io/kubernetes/cmd/kubectl "$version_flags" ;;
  *) echo "unknown binary $name" >&2; exit 2 ;;
  esac
done
