#!/usr/bin/env bash
# Generates the Go code for proto/outrigger/v1/*.proto into OUT/gen/outrigger/v1 (default: this folder),
# with protoc from the project's virtualenv (grpcio-tools, pinned in requirements.lock) and the pinned
# protoc-gen-go / protoc-gen-go-grpc from the Go module proxy (built once into .bin/, not committed).
# The .proto files are not edited: Go package paths are given with M options.
#
#   clients/go/genproto.sh            regenerate the committed code (make go-proto)
#   clients/go/genproto.sh OUTDIR     generate into OUTDIR (the staleness test compares the two)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$here}"
python="${PYTHON:-$root/.venv/bin/python}"
PROTOC_GEN_GO=v1.36.8        # google.golang.org/protobuf/cmd/protoc-gen-go
PROTOC_GEN_GO_GRPC=v1.5.1    # google.golang.org/grpc/cmd/protoc-gen-go-grpc
module=outrigger.dev/clients/go
pkg="$module/gen/outrigger/v1;outriggerv1"

bin="$here/.bin"
mkdir -p "$bin"
# One folder per pinned version, so a changed pin builds the new one.
tools="$bin/protoc-gen-go-$PROTOC_GEN_GO-grpc-$PROTOC_GEN_GO_GRPC"
if [ ! -x "$tools/protoc-gen-go" ] || [ ! -x "$tools/protoc-gen-go-grpc" ]; then
    mkdir -p "$tools"
    (cd "$tools" && GOFLAGS=-mod=mod GOBIN="$tools" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO" \
        && GOFLAGS=-mod=mod GOBIN="$tools" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC")
fi

protos=()
mapping=()
for f in $(cd "$root/proto" && ls outrigger/v1/*.proto | sort); do
    protos+=("$f")
    mapping+=("M$f=$pkg")
done
go_opts="module=$module"
for m in "${mapping[@]}"; do go_opts="$go_opts,$m"; done

mkdir -p "$out/gen/outrigger/v1"
rm -f "$out"/gen/outrigger/v1/*.pb.go
"$python" -m grpc_tools.protoc \
    --proto_path="$root/proto" \
    --plugin=protoc-gen-go="$tools/protoc-gen-go" \
    --plugin=protoc-gen-go-grpc="$tools/protoc-gen-go-grpc" \
    --go_out="$out" --go_opt="$go_opts" \
    --go-grpc_out="$out" --go-grpc_opt="$go_opts" \
    "${protos[@]}"
