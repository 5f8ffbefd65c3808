#!/usr/bin/env bash
# Builds the real Kubernetes components the live-cluster tests and benchmarks run: etcd, kube-apiserver,
# kube-scheduler, kubectl and kube-controller-manager (its resourceclaim controller makes the claims of
# pods' ResourceClaimTemplates), from the Go module proxy at the versions pinned in the go.mod files beside
# this script: one Kubernetes release, tests/k8s/kubernetes/<release>/go.mod (etcd is the same for all).
# The binaries go to a cache outside the work tree, one folder per pin, and are reused: the first build
# takes minutes (half an hour on a busy 2-core machine), later calls return at once. Prints the folder.
#
#   tests/k8s/build.sh              build what is missing, print the folder
#   tests/k8s/build.sh --print-dir  only print the folder (nothing is built)
#   tests/k8s/build.sh --print-release  only print the release it would build (1.35)
#
# OUTRIGGER_K8S_RELEASE picks the release (1.35, 1.36, 1.37: the folders of tests/k8s/kubernetes/; `make
# k8s K8S_RELEASE=1.37`); without it, default_release below, the one the tests and `make test` run.
# OUTRIGGER_K8S_CACHE overrides the folder (the binaries go to its bin/). A binary is written under a
# temporary name and renamed once built and run, so an interrupted build leaves no half-written binary;
# two builds at once take turns (a lock file in the folder).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
default_release=1.37 # the release Outrigger is tested against by default: moving it is this one line
release="${OUTRIGGER_K8S_RELEASE:-$default_release}"
k8s_dir="$here/kubernetes/$release"
if ! [[ "$release" =~ ^[0-9]+\.[0-9]+$ ]] || [ ! -f "$k8s_dir/go.mod" ]; then
    known="$(cd "$here/kubernetes" && ls -d */ 2>/dev/null | tr -d / | tr '\n' ' ')"
    echo "$0: no pinned Kubernetes release '$release' (OUTRIGGER_K8S_RELEASE); pinned: ${known% }" >&2
    exit 2
fi
k8s_version="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$k8s_dir/go.mod")"
etcd_version="$(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" {print $3}' "$here/etcd/go.mod")"
cache="${OUTRIGGER_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outrigger/k8s-$k8s_version-etcd-$etcd_version}"
bin="$cache/bin"
case "${1:-}" in
    --print-dir) echo "$bin"; exit 0 ;;
    --print-release) echo "$release"; exit 0 ;;
    "") ;;
    *) echo "usage: $0 [--print-dir | --print-release]" >&2; exit 2 ;;
esac
mkdir -p "$bin"
exec 9>"$cache/.lock"
flock 9

# What each binary says about its version once built: a binary that says otherwise (an older pin's, or
# one built without the version stamped) is built again.
# The first line by awk, which reads to the end: `head -n 1` would close the pipe early, and a binary
# still writing gets SIGPIPE, which pipefail turns into a failed build.
reports() { # binary path
    case "$1" in
        etcd) "$2" --version 2>/dev/null | awk 'NR == 1' ;;
        kubectl) "$2" version --client 2>/dev/null | awk 'NR == 1' ;;
        *) "$2" --version 2>/dev/null ;;
    esac
}
expected() { # binary
    case "$1" in
        etcd) echo "etcd Version: ${etcd_version#v}" ;;
        kubectl) echo "Client Version: $k8s_version" ;;
        *) echo "Kubernetes $k8s_version" ;;
    esac
}

# The version the binaries report (`kubectl version`, /version): what a release build stamps.
minor="${k8s_version#v1.}"; minor="${minor%%.*}"
ldflags="-s"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build() { # module (etcd, or kubernetes: the release's) package output
    if [ -x "$bin/$3" ] && [ "$(reports "$3" "$bin/$3")" = "$(expected "$3")" ]; then
        return
    fi
    command -v go >/dev/null || { echo "$0: go is not installed (it builds $3 from the Go module proxy)" >&2; exit 1; }
    echo "building $3 ($2) into $bin" >&2
    rm -f "$bin/$3.tmp"
    local dir="$here/etcd"; [ "$1" = etcd ] || dir="$k8s_dir"
    (cd "$dir" && GOFLAGS="${GOFLAGS:-} -mod=mod -buildvcs=false" CGO_ENABLED=0 \
        go build -trimpath -ldflags="$ldflags" -o "$bin/$3.tmp" "$2")
    local got; got="$(reports "$3" "$bin/$3.tmp")"
    if [ "$got" != "$(expected "$3")" ]; then
        echo "$0: the $3 just built reports '$got', not '$(expected "$3")'" >&2
        exit 1
    fi
    mv "$bin/$3.tmp" "$bin/$3"
}
build etcd go.etcd.io/etcd/server/v3 etcd
build kubernetes k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver
build kubernetes k8s.io/kubernetes/cmd/kubectl kubectl
build kubernetes k8s.io/kubernetes/cmd/kube-scheduler kube-scheduler
build kubernetes k8s.io/kubernetes/cmd/kube-controller-manager kube-controller-manager
echo "$bin"
