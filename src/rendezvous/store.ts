/**
 * Store: the small key/value service the ranks meet through at start-up (addresses for the
 * mesh, barriers). Values are opaque bytes; keys are UTF-8 strings. Keys are write-once by
 * convention (a later set overwrites, which the rendezvous code never relies on).
 */

export interface StoreAddress {
  host: string;
  port: number;
}

export interface Store {
  /** Stores `value` under `key` and wakes every get waiting for it. */
  set(key: string, value: Uint8Array): Promise<void>;
  /**
   * The value of `key`, waiting until some rank sets it. Rejects with TimeoutError naming the
   * key after `timeoutMs` (0 means: answer now or time out now).
   */
  get(key: string, timeoutMs: number): Promise<Uint8Array>;
  /** Atomically adds `delta` to the integer counter `key` (missing = 0) and returns the new value. */
  add(key: string, delta: number): Promise<number>;
  /** Releases the connection; pending calls reject with ShutdownError. Idempotent. */
  close(): Promise<void>;
}
