/**
 * The entry of the engine's Node worker thread: the host of engine_main.ts over worker_threads
 * (the caller's requests on the worker's own channel, taken early with receiveMessageOnPort;
 * completions on a port of their own, which a blocked caller drains), logging to stderr, every
 * backend of transport/backends.ts, the timeline file, V8's collector, and the reporter to
 * ringrun's dashboard when it watches.
 */
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { type MessagePort, parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { Logger } from '../../core/logger.js';
import { v8Collector } from '../../core/v8_collector.js';
import { openAutotuneLog } from '../../observability/autotune_log.js';
import { dashboardTarget } from '../../observability/dashboard_target.js';
import { openTimeline, timelinePathFor } from '../../observability/timeline.js';
import { chooseBackend, kBackends } from '../../transport/backends.js';
import { httpReportSender } from '../reporting/dashboard_http.js';
import { reportEngine } from '../reporting/engine_reporting.js';
import { runEngine } from './engine_main.js';
import type { ToEngine, WorkerInit } from './worker_protocol.js';

const init = workerData as WorkerInit;
const { config, port } = init;
/** The caller's requests arrive here (this module only ever runs as a worker). */
const fromCaller = parentPort as MessagePort;
const dashboard = dashboardTarget(config.dashboard);
/** Reports to ringrun's dashboard, when it watches (it sees the warnings and errors logged here too). */
const reporting =
  dashboard &&
  reportEngine(
    httpReportSender(dashboard),
    { host: hostname(), pid: process.pid },
    {
      rank: config.rank,
      size: config.size,
      timelineFile: config.timeline && resolve(config.size > 1 ? timelinePathFor(config.timeline, config.rank) : config.timeline),
    },
  );

void runEngine({
  init,
  logger: new Logger(`[rank ${config.rank}]`, config.logLevel, (line) => {
    process.stderr.write(line);
    reporting?.reporter.noteLogLine(line);
  }),
  backends: { table: kBackends, choose: chooseBackend },
  listen(onMessage) {
    const listener = (message: ToEngine) => onMessage(message);
    fromCaller.on('message', listener);
    return () => fromCaller.off('message', listener);
  },
  takePosted() {
    const messages: ToEngine[] = [];
    for (let m = receiveMessageOnPort(fromCaller); m; m = receiveMessageOnPort(fromCaller)) messages.push(m.message as ToEngine);
    return messages;
  },
  post: (batch) => port.postMessage(batch),
  close: () => port.close(),
  openTimeline,
  openAutotuneLog,
  collect: v8Collector(),
  ...(reporting && { observer: reporting.observer }),
});
