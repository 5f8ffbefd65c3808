#!/usr/bin/env node
'use strict';
/**
 * Serves the example plugins (TierZone, PoolFit, and SharedLabelPlacement and EvictLower for PodGroup
 * cycles) over gRPC as an Outrigger plugin host.
 *
 *   node clients/node/server.js --listen 127.0.0.1:50071 [--framework 127.0.0.1:50051]
 *
 * --listen: address to serve on (port 0 picks a free one). --framework: the framework's Handle and
 * CycleState address; by default the one the framework sends in its Handshake. The first line on
 * stdout says where the host listens. SIGTERM/SIGINT stop it gracefully (health NOT_SERVING, calls in
 * flight finish, spans are flushed). Tracing: OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_SERVICE_NAME.
 */

const { PluginHost } = require('./lib/host');
const { setupTracing, shutdownTracing } = require('./lib/tracing');
const { TierZone } = require('./plugins/tierzone');
const { SharedLabelPlacement } = require('./plugins/sharedlabel');
const { PoolFit } = require('./plugins/poolfit');
const { EvictLower } = require('./plugins/evictlower');

const USAGE = 'usage: node server.js [--listen HOST:PORT] [--framework HOST:PORT]';

function parseArgs(argv) {
  const out = { listen: '127.0.0.1:50071', framework: '' };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const [flag, inline] = arg.includes('=') ? arg.split(/=(.*)/s, 2) : [arg, undefined];
    if (flag === '-h' || flag === '--help') {
      console.log(USAGE);
      process.exit(0);
    }
    if (flag !== '--listen' && flag !== '--framework') throw new Error(`unknown argument ${arg}\n${USAGE}`);
    const value = inline !== undefined ? inline : argv[++i];
    if (!value || !value.includes(':')) throw new Error(`${flag} needs a HOST:PORT address, got ${value}`);
    out[flag.slice(2)] = value;
  }
  return out;
}

async function main() {
  let args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (err) {
    console.error(`error: ${err.message}`);
    process.exit(2);
  }
  const tracing = setupTracing();
  const host = new PluginHost([TierZone, SharedLabelPlacement, PoolFit, EvictLower], { listen: args.listen, framework: args.framework });
  try {
    await host.start();
  } catch (err) {
    console.error(`error: ${err.message}`);
    process.exit(1);
  }
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await host.stop(5000);
    await shutdownTracing();
    process.exit(0);
  };
  // Handlers first: whoever reads the line below may send SIGTERM at once, and must get a graceful stop.
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  const names = [...host.plugins.keys()].join(', ');
  // The first line of output says where the host listens (tests read the port from it).
  console.log(`outrigger node plugin host listening on ${host.address} (plugins: ${names}; tracing ${tracing ? 'on' : 'off'})`);
}

main();
