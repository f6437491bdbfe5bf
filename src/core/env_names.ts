/**
 * The names of the environment variables of ringreduce's contract (docs/env.md): the launcher
 * writes them and core/config.ts reads them, both from this one table.
 */

export const kEnv = {
  rank: 'RINGREDUCE_RANK',
  size: 'RINGREDUCE_SIZE',
  localRank: 'RINGREDUCE_LOCAL_RANK',
  localSize: 'RINGREDUCE_LOCAL_SIZE',
  crossRank: 'RINGREDUCE_CROSS_RANK',
  crossSize: 'RINGREDUCE_CROSS_SIZE',
  storeAddr: 'RINGREDUCE_STORE_ADDR',
  storeUrl: 'RINGREDUCE_STORE_URL',
  address: 'RINGREDUCE_ADDRESS',
  jobId: 'RINGREDUCE_JOB_ID',
  secret: 'RINGREDUCE_SECRET',
  networkInterface: 'RINGREDUCE_NETWORK_INTERFACE',
  backend: 'RINGREDUCE_BACKEND',
  startTimeoutMs: 'RINGREDUCE_START_TIMEOUT_MS',
  ioTimeoutMs: 'RINGREDUCE_IO_TIMEOUT_MS',
  stallTimeoutMs: 'RINGREDUCE_STALL_TIMEOUT_MS',
  stallWarningMs: 'RINGREDUCE_STALL_WARNING_MS',
  heartbeatMs: 'RINGREDUCE_HEARTBEAT_MS',
  logLevel: 'RINGREDUCE_LOG_LEVEL',
  fusionThresholdBytes: 'RINGREDUCE_FUSION_THRESHOLD_BYTES',
  cacheCapacity: 'RINGREDUCE_CACHE_CAPACITY',
  segmentBytes: 'RINGREDUCE_SEGMENT_BYTES',
  hierarchicalAllreduce: 'RINGREDUCE_HIERARCHICAL_ALLREDUCE',
  hierarchicalAllgather: 'RINGREDUCE_HIERARCHICAL_ALLGATHER',
  burstHoldMs: 'RINGREDUCE_BURST_HOLD_MS',
  unixSockets: 'RINGREDUCE_UNIX_SOCKETS',
  sharedMemory: 'RINGREDUCE_SHARED_MEMORY',
  timeline: 'RINGREDUCE_TIMELINE',
  readyExchange: 'RINGREDUCE_READY_EXCHANGE',
  elasticWorker: 'RINGREDUCE_ELASTIC_WORKER',
  restartAttempt: 'RINGREDUCE_RESTART_ATTEMPT',
  dashboard: 'RINGREDUCE_DASHBOARD',
} as const;
