"""Generated protobuf/gRPC stubs. Regenerate with `make proto`; do not edit."""
