'use strict';
/**
 * Storage objects for Node.js plugins: the PersistentVolumeClaims, PersistentVolumes, StorageClasses
 * and CSINodes of the framework's cache, followed through the snapshot mirror stream
 * (Handle.FollowSnapshot with `volumes: true`) by a host with a plugin declaring
 * `static needsVolumes = true`. The host reads no nodes or pods from the stream (it asks for
 * `nodes_only`, and skips what still comes); it keeps the storage objects and the generation, so a
 * call can wait until the mirror has applied its cycle's generation (see `call.volumes()`).
 *
 * Objects are the decoded outrigger.v1 messages (keepCase field names: `metadata.name`,
 * `volume_name`, `storage_class_name`...), as the Handle service returns nodes.
 */

const grpc = require('@grpc/grpc-js');

const KINDS = Object.freeze({
  PersistentVolumeClaim: 'persistent_volume_claim',
  PersistentVolume: 'persistent_volume',
  StorageClass: 'storage_class',
  CSINode: 'csi_node',
});
const FIELD_KIND = Object.fromEntries(Object.entries(KINDS).map(([kind, field]) => [field, kind]));
const BETA_CLASS = 'volume.beta.kubernetes.io/storage-class';

function keyOf(kind, meta) {
  return kind === 'PersistentVolumeClaim' ? `${meta.namespace || ''}/${meta.name || ''}` : meta.name || '';
}

/** What a plugin reads: the storage objects by key, the way Go plugins use their listers. */
class VolumeLister {
  constructor(stores) {
    this._stores = stores;
  }

  /** The PersistentVolumeClaim namespace/name, or undefined. */
  claim(namespace, name) {
    return this._stores.PersistentVolumeClaim.get(`${namespace}/${name}`);
  }

  /** The PersistentVolume name, or undefined. */
  volume(name) {
    return this._stores.PersistentVolume.get(name);
  }

  /** The StorageClass name, or undefined. */
  storageClass(name) {
    return this._stores.StorageClass.get(name);
  }

  /** The CSINode of node name, or undefined. */
  csiNode(name) {
    return this._stores.CSINode.get(name);
  }

  /** Every object of kind ('PersistentVolumeClaim', 'PersistentVolume', 'StorageClass', 'CSINode'), by key. */
  list(kind) {
    const store = this._stores[kind];
    if (store === undefined) throw new Error(`not a storage kind: ${kind} (one of ${Object.keys(KINDS).join(', ')})`);
    return [...store.keys()].sort().map((k) => store.get(k));
  }

  /** The class a claim asks for ('' for none): the beta annotation first, then storage_class_name. */
  static classOf(claim) {
    const beta = ((claim.metadata || {}).annotations || {})[BETA_CLASS];
    return beta !== undefined ? beta : claim.storage_class_name || '';
  }
}

/** The storage objects of the framework's cache as the stream brought them, with its generation. */
class StorageMirror {
  constructor() {
    this.generation = 0;
    this.resyncs = 0;
    this._waiters = new Set();
    this.reset();
  }

  reset() {
    this.generation = 0;
    this._stores = Object.fromEntries(Object.keys(KINDS).map((k) => [k, new Map()]));
  }

  /** The objects, live: the lister always reads the latest applied state. */
  lister() {
    return new VolumeLister(this._stores);
  }

  /** Applies one SnapshotDelta's storage changes (a resync first empties the stores). */
  apply(delta) {
    const generation = Number(delta.generation) || 0;
    if (delta.full_resync) {
      this.reset();
      this.resyncs++;
    } else if (generation <= this.generation) {
      return; // already applied (a replay after a reconnect)
    }
    for (const ref of delta.storage_removed || []) {
      const store = this._stores[ref.kind];
      if (store !== undefined) store.delete(keyOf(ref.kind, ref));
    }
    for (const obj of delta.storage_upserts || []) {
      const kind = FIELD_KIND[obj.object];
      if (kind === undefined) continue;
      const value = obj[obj.object];
      this._stores[kind].set(keyOf(kind, value.metadata || {}), value);
    }
    this.generation = generation;
    for (const waiter of [...this._waiters]) waiter();
  }

  /** Resolves once `generation` is applied; rejects after `timeoutMs` naming both generations. */
  waitFor(generation, timeoutMs) {
    if (this.generation >= generation) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const done = () => {
        if (this.generation < generation) return;
        clearTimeout(timer);
        this._waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(() => {
        this._waiters.delete(done);
        reject(new Error(`snapshot generation ${generation} not reached within ${timeoutMs / 1000}s `
          + `(the storage mirror is at generation ${this.generation})`));
      }, timeoutMs);
      this._waiters.add(done);
    });
  }
}

/**
 * Follows the framework's snapshot stream into `mirror` until `stopped()` says so, reconnecting with
 * backoff (100 ms doubling to 2 s). `want` says what the stream carries: storage objects (`volumes`,
 * the default) and device objects (`devices`). Returns a function that ends the current stream.
 */
function followStorage(framework, mirror, plugin, log, stopped, want = { volumes: true, devices: false }) {
  let backoff = 100;
  let failing = false;
  let current = null;
  const connect = () => {
    if (stopped()) return;
    const metadata = new grpc.Metadata();
    if (framework.credential) metadata.set('authorization', `Bearer ${framework.credential}`);
    const stream = framework.handle.FollowSnapshot(
      { from_generation: mirror.generation, plugin, nodes_only: true, volumes: Boolean(want.volumes),
        devices: Boolean(want.devices) }, metadata);
    current = stream;
    stream.on('data', (delta) => {
      mirror.apply(delta);
      backoff = 100;
      failing = false;
    });
    let ended = false;
    const retry = (err) => {
      if (ended) return;
      ended = true;
      if (stopped() || current !== stream) return;
      if (!failing) {
        log(`following the snapshot at ${framework.address}: ${err ? err.details || err.message : 'stream ended'} (retrying)`);
        failing = true;
      }
      setTimeout(connect, backoff).unref();
      backoff = Math.min(backoff * 2, 2000);
    };
    stream.on('error', retry);
    stream.on('end', () => retry(null));
  };
  connect();
  return () => {
    const stream = current;
    current = null;
    if (stream !== null) stream.cancel();
  };
}

module.exports = { StorageMirror, VolumeLister, followStorage };
