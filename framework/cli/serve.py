"""``outrigger serve``, the framework service (on the embedded store or a live cluster), and
``outrigger plugin serve``, a plugin host beside it."""

from __future__ import annotations

import argparse
import logging
import sys

from .. import features
from ..observe.serving import add_serving_flags
from .configfiles import remote_endpoints, scheduler_config
from .flags import DEFAULT_SERVER
from .output import OutputError
from .registry import UserError, command, run_async
from .security import add_plugin_host_flags, add_server_flags, server_tls

__all__ = ["cmd_plugin", "cmd_serve", "feature_gates"]

log = logging.getLogger("outrigger.features")


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="KubeSchedulerConfiguration file (default: kube-scheduler's defaults)")
    p.add_argument("--listen", default=DEFAULT_SERVER, help=f"address to serve on (default {DEFAULT_SERVER})")
    p.add_argument("--plugins", metavar="FILE", help="RemotePlugins document: remote plugin endpoints")
    p.add_argument("--advertise", metavar="ADDR",
                   help="address plugin hosts use to reach this framework (default: the bound address)")
    p.add_argument("--http", metavar="ADDR",
                   help="also serve the secure port's endpoints over plain HTTP on ADDR, without TLS or "
                        "authentication: for local use (a loopback address)")
    p.add_argument("--debug-scores", type=int, default=0, metavar="N",
                   help="log (and keep) the top N nodes' per-plugin scores of each pod (0: off; switchable "
                        "over HTTP)")
    p.add_argument("--trace-exporter", metavar="NAMES",
                   help="otlp, console or none, comma-separated (default: $OTEL_TRACES_EXPORTER, else none)")
    p.add_argument("--otlp-endpoint", metavar="URL",
                   help="OTLP/gRPC collector (default: $OTEL_EXPORTER_OTLP_ENDPOINT, else localhost:4317)")
    p.add_argument("--service-name", help="service.name of the spans (default: $OTEL_SERVICE_NAME, else "
                                          "outrigger-framework)")
    p.add_argument("--trace-sampler", help="default: $OTEL_TRACES_SAMPLER, else parentbased_always_on")
    p.add_argument("--trace-sampler-arg", help="the ratio of *traceidratio samplers ($OTEL_TRACES_SAMPLER_ARG)")
    p.add_argument("--trace-keep-ratio", metavar="R",
                   help="tail sampling: export every failed or slow scheduling context and this ratio of the "
                        "others ($OUTRIGGER_TRACE_KEEP_RATIO)")
    p.add_argument("--trace-keep-slow", metavar="250ms|2s|p99",
                   help="tail sampling: a context this slow is always exported ($OUTRIGGER_TRACE_KEEP_SLOW)")
    p.add_argument("--trace-store", type=int, metavar="N",
                   help="keep the last N traces in process for `outrigger trace` (turns tracing on)")
    p.add_argument("--kubeconfig", metavar="PATH",
                   help="schedule the Kubernetes cluster of this kubeconfig (default: the configuration's "
                        "clientConnection.kubeconfig; without either, the embedded store)")
    p.add_argument("--in-cluster", action="store_true",
                   help="schedule the cluster this pod runs in, with its service account")
    p.add_argument("--feature-gates", action="append", metavar="NAME=BOOL,...",
                   help=f"kube-scheduler's feature gates, e.g. GenericWorkload=true,OpportunisticBatching=false, "
                        f"with {features.VERSION}'s defaults and locks (docs/configuration.md)")
    p.add_argument("--no-console", action="store_true",
                   help="do not serve the web console under /ui/ on the secure and --http ports (docs/console.md)")
    p.add_argument("--console-otlp", metavar="HOST:PORT",
                   help="receive plugin hosts' spans over OTLP/gRPC here, for the console's waterfalls (plain "
                        "text: a loopback or pod-local address)")
    p.add_argument("--watch-config", type=_flag_bool, nargs="?", const=True, default=True, metavar="BOOL",
                   help="apply a change of the --config and --plugins files without a restart (default true; "
                        "--watch-config=false reads them once; docs/configuration.md)")
    add_server_flags(p, "clients and plugin hosts")
    add_serving_flags(p)


def _flag_bool(value: str) -> bool:
    """A kube-style boolean flag value (``--watch-config=false``)."""
    lowered = value.strip().lower()
    if lowered in ("true", "1", "t", "yes"):
        return True
    if lowered in ("false", "0", "f", "no"):
        return False
    raise argparse.ArgumentTypeError(f"must be true or false, got {value!r}")


@command("serve", "run the framework service", _serve_args, examples="""\
  outrigger serve                                   # kube-scheduler's default profile on 127.0.0.1:50051
  outrigger serve --config scheduler.yaml --listen 0.0.0.0:50051
  outrigger serve --config scheduler.yaml --plugins remote-plugins.yaml
  outrigger serve --http 127.0.0.1:10251 --trace-store 1000 --debug-scores 5
  outrigger serve --bind-address 0.0.0.0 --token-auth-file tokens.csv   # HTTPS on 10259 (docs/security.md)
  outrigger serve --config scheduler.yaml --kubeconfig ~/.kube/config   # a live cluster (docs/kubernetes.md)
  outrigger serve --feature-gates OpportunisticBatching=false          # kube-scheduler's gates
  outrigger serve --config scheduler.yaml --watch-config=false        # read the files once, no live changes
  OTEL_TRACES_EXPORTER=otlp OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 outrigger serve""")
def cmd_serve(args: argparse.Namespace) -> int:
    from ..liveconfig import WatchedFiles
    from ..observe.observability import ObservabilityConfig
    from ..observe.serving import ServingConfigError, serving_config
    from ..observe.tracing import TracingConfig, TracingConfigError
    from ..service import serve

    feature_gates(args.feature_gates)
    endpoints = remote_endpoints(args.plugins)
    try:
        tracing = TracingConfig.from_env(
            exporters=args.trace_exporter, endpoint=args.otlp_endpoint, service_name=args.service_name,
            sampler=args.trace_sampler, sampler_arg=args.trace_sampler_arg, store=args.trace_store,
            keep_ratio=args.trace_keep_ratio, keep_slow=args.trace_keep_slow,
        )
    except TracingConfigError as exc:
        raise UserError(str(exc)) from None
    if args.debug_scores < 0:
        raise UserError(f"--debug-scores must be >= 0, got {args.debug_scores}")
    from ..kube.client import KubeConfigError
    from ..kube.serve import serve_cluster
    from ..kube.settings import configured_kubeconfig

    kubeconfig = args.kubeconfig or configured_kubeconfig(args.config)
    try:
        secure = serving_config(args, kubeconfig)  # delegates to the cluster it schedules
    except ServingConfigError as exc:
        raise UserError(str(exc)) from None
    obs = ObservabilityConfig(tracing=tracing if tracing.enabled else None, http=args.http,
                              debug_scores=args.debug_scores, secure=secure, console=not args.no_console,
                              console_otlp=args.console_otlp)
    watch = WatchedFiles(args.config, args.plugins) if args.watch_config and (args.config or args.plugins) else None
    try:
        if kubeconfig or args.in_cluster:
            run_async(serve_cluster(lambda registry: scheduler_config(args.config, registry), args.listen,
                                    endpoints, args.advertise, obs, tls=server_tls(args), kubeconfig=kubeconfig,
                                    in_cluster=args.in_cluster, config_file=args.config, watch=watch))
        else:
            run_async(serve(lambda registry: scheduler_config(args.config, registry), args.listen, endpoints,
                            args.advertise, obs, tls=server_tls(args), watch=watch))
    except OutputError:
        raise  # stdout failed (its own message), not the address or a file
    except (OSError, KubeConfigError, ServingConfigError) as exc:
        raise UserError(str(exc)) from None
    return 0


def feature_gates(values: list[str] | None) -> features.FeatureGates:
    """Parses ``--feature-gates`` (given any number of times), installs the result for the process and
    says what it is: the effective scheduling gates on stderr when the flag was given (logged at info
    otherwise), a warning for each gate set that is GA, deprecated or changes nothing here."""
    try:
        gates = features.parse(values)
    except features.FeatureGateError as exc:
        raise UserError(f"--feature-gates: {exc}") from None
    features.install(gates)
    for note in features.notes(gates):
        log.warning("%s", note)
    line = f"outrigger: feature gates ({features.VERSION}): {gates}"
    if values:
        print(line, file=sys.stderr, flush=True)
    else:
        log.info("%s", line)
    return gates


def _plugin_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="plugin_command", required=True, metavar="COMMAND")
    ps = sub.add_parser("serve", help="serve plugin classes over gRPC",
                        formatter_class=argparse.RawDescriptionHelpFormatter, epilog="""examples:
  outrigger plugin serve pluginhost.examples.coscheduling:Coscheduling --listen 127.0.0.1:50061
  outrigger plugin serve mypackage.plugins:PLUGINS --framework 127.0.0.1:50051""")
    ps.add_argument("target", metavar="MODULE:ATTR", help="a plugin class, or a list of them (or a function)")
    ps.add_argument("--listen", default="127.0.0.1:50061", help="address to serve on (default 127.0.0.1:50061)")
    ps.add_argument("--framework", metavar="ADDR",
                    help="the framework's address (default: the one it announces when it connects)")
    add_server_flags(ps, "the framework")
    add_plugin_host_flags(ps)


@command("plugin", "host plugins for a framework (a sidecar)", _plugin_args, examples="""\
  outrigger plugin serve pluginhost.examples.coscheduling:Coscheduling --listen 127.0.0.1:50061""")
def cmd_plugin(args: argparse.Namespace) -> int:
    from pluginhost.definition import PluginDefinitionError
    from pluginhost.host import load_plugins, serve

    from .security import plugin_host_security

    try:
        plugins = load_plugins(args.target)
        serve(plugins, args.listen, args.framework, **plugin_host_security(args))
    except PluginDefinitionError as exc:
        raise UserError(str(exc)) from None
    except OutputError:
        raise
    except OSError as exc:
        raise UserError(f"cannot serve on {args.listen}: {exc}") from None
    return 0
