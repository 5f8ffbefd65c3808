#!/usr/bin/env node
'use strict';
/**
 * VolumeWitness (tests/volume_plugin_witness.py) written for the Node.js plugin host, served on
 * --listen HOST:PORT: it reads a pod's volumes and, through `call.volumes()` (needsVolumes), the
 * claims, volumes and classes behind them, and keeps only the nodes in the zone of each claim's
 * volume. Its rejections say what it saw, word for word as the Python one's, so
 * tests/test_remote_volumes_node.py gives both the same steps and expects the same verdicts.
 */

const path = require('node:path');
const { PluginHost, Status } = require(path.resolve(__dirname, '..', 'clients', 'node', 'lib', 'host'));
const { VolumeLister } = require(path.resolve(__dirname, '..', 'clients', 'node', 'lib', 'volumes'));

const ZONE = 'topology.kubernetes.io/zone';

function claimOf(pod, v) {
  if (v.source === 'persistentVolumeClaim') return v.claim_name;
  if (v.source === 'ephemeral') return `${pod.metadata.name}-${v.name}`;
  return '';
}

class VolumeWitness {
  static pluginName = 'VolumeWitness';
  static needsVolumes = true;

  async filter(state, pod, nodes, call) {
    const vols = (pod.spec && pod.spec.volumes) || [];
    if (!vols.length) return nodes.map(() => null);
    const store = await call.volumes();
    const prefix = `volumes [${vols.map((v) => `'${v.name}:${v.source}'`).join(', ')}]: `;
    const wants = [];
    for (const v of vols) {
      const name = claimOf(pod, v);
      if (!name) continue;
      const claim = store.claim(pod.metadata.namespace, name);
      if (claim === undefined) return nodes.map(() => Status.unresolvable(`${prefix}claim ${name} not found`));
      if (!claim.volume_name) return nodes.map(() => Status.unschedulable(`${prefix}claim ${name} not bound`));
      const pv = store.volume(claim.volume_name);
      if (pv === undefined) return nodes.map(() => Status.unresolvable(`${prefix}volume ${claim.volume_name} not found`));
      const sc = store.storageClass(VolumeLister.classOf(claim));
      const labels = pv.metadata.labels || {};
      const zone = labels[ZONE] || '';
      wants.push([zone, `${pv.metadata.name} in ${ZONE in labels ? zone : '-'} class ${sc ? sc.provisioner : 'none'}`]);
    }
    const infos = await call.nodeInfos();
    return nodes.map((n) => {
      const zone = (infos.get(n.name).node.metadata.labels || {})[ZONE] || '';
      const wrong = wants.find(([want]) => want && want !== zone);
      return wrong ? Status.unresolvable(`volume ${wrong[1]}`) : null;
    });
  }
}

async function main() {
  const i = process.argv.indexOf('--listen');
  const host = new PluginHost([VolumeWitness], { listen: i >= 0 ? process.argv[i + 1] : '127.0.0.1:0' });
  await host.start();
  const stop = async () => {
    await host.stop(2000);
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  console.log(`outrigger node plugin host listening on ${host.address} (plugins: VolumeWitness)`);
}

main();
