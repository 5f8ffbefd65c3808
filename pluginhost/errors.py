"""The root of every exception Outrigger raises: :class:`OutriggerError`.

Each class also keeps the built-in base its callers catch (``ValueError`` for input that does not
parse, ``RuntimeError`` for a component that cannot go on, ``TypeError`` for a programming mistake),
so ``except ValueError`` and ``except OutriggerError`` both work. The tree, one sentence per class
(docs/architecture.md has it with the modules)::

    OutriggerError
    ├── input that does not parse or validate (also ValueError)
    │   ├── ConfigError ─ a KubeSchedulerConfiguration or RemotePlugins document is invalid.
    │   ├── ConfigChangeRefused ─ a live change of serve's --config or --plugins file cannot be applied.
    │   ├── FieldError ─ a field of a Kubernetes object or configuration document is invalid.
    │   │   ├── DraDecodeError ─ a ResourceClaim, template, DeviceClass or ResourceSlice does not decode.
    │   │   └── PodGroupDecodeError ─ a PodGroup or Workload does not decode.
    │   ├── TextError ─ a YAML or JSON text cannot be read at all.
    │   ├── ManifestError ─ a Pod, Node or other manifest is invalid.
    │   ├── QuantityError ─ a Kubernetes quantity ("500m", "1Gi") is malformed.
    │   ├── SelectorError ─ a label or field selector of the command line is malformed.
    │   ├── ApplyError ─ an object applied to the embedded store is refused.
    │   ├── PluginArgsError ─ a plugin's pluginConfig args are invalid.
    │   ├── ViewError ─ a transformer's node view cannot be applied.
    │   ├── LookaheadAnswerError ─ a host's lookahead answer breaks the contract.
    │   ├── TLSConfigError ─ TLS files or flags are missing, unreadable or do not go together.
    │   ├── TracingConfigError ─ the tracing settings are invalid.
    │   ├── ServingConfigError ─ the secure port's settings are invalid.
    │   ├── CertificateError ─ a serving certificate or client CA cannot be used.
    │   ├── TokenFileError ─ a static token file is invalid.
    │   └── FeatureGateError ─ a --feature-gates value is malformed, unknown, locked or leaves a dependency off.
    ├── a component that cannot go on (also RuntimeError)
    │   ├── RemotePluginsError ─ a remote plugin endpoint cannot be used at all.
    │   ├── RemotePluginError ─ one call to a remote plugin failed.
    │   ├── ExtenderError ─ a call to an HTTP extender failed.
    │   ├── CacheError ─ a cache operation contradicts the cache's state (a bug in the caller).
    │   ├── MirrorError ─ a plugin host's mirror cannot provide the snapshot a request names.
    │   ├── VolumeStoreError ─ an assume or write contradicts the volume store.
    │   ├── DraConflict ─ a ResourceClaim status write lost (the claim changed or is gone).
    │   ├── FrameworkUnavailableError ─ a plugin host cannot reach the framework's services.
    │   ├── NotInHostError ─ the per-call context was asked for outside a plugin host's call.
    │   └── ClusterError ─ a component of the local cluster did not start or become ready.
    ├── a programming mistake in a plugin (also TypeError)
    │   ├── PluginDefinitionError ─ a plugin class cannot be served as it is declared.
    │   └── StateValueError ─ a CycleState value cannot be sent to another process.
    ├── KubeError ─ anything that went wrong talking to the Kubernetes API.
    │   ├── KubeConfigError ─ a kubeconfig or in-cluster configuration cannot be used.
    │   ├── ApiError ─ the API server refused a request (HTTP status and reason).
    │   │   └── Gone ─ a watch's resourceVersion is no longer in the server's history (410).
    │   └── ApiUnreachable ─ a request got no answer from the API server.
    ├── KubectlError ─ a kubectl command failed (also subprocess.CalledProcessError).
    ├── ReviewError ─ the authenticator or authorizer could not answer.
    ├── StreamBroken ─ a Filter or Score stream to a replica broke (its batches go to another).
    ├── ClientError ─ a client library call failed (a message meant for users, the gRPC code).
    ├── ConsoleLookupError ─ a pod or trace a web console request names is not held (also LookupError).
    ├── OutputError ─ the command line's output cannot be written (also OSError).
    │   └── OutputClosed ─ the reader of the command line's output went away.
    └── UserError ─ a command of the command line cannot do what it was asked.
"""

from __future__ import annotations

__all__ = ["OutriggerError"]


class OutriggerError(Exception):
    """Any error Outrigger raises on purpose (see the module docstring for the tree)."""
