/** ringrun's browser flags (--browser, --headless, --browser-script, --browser-host, --https-*), checked. */
import { basename } from 'node:path';
import { InvalidArgumentError } from '../../core/errors.js';
import { parseCount, parsePort } from '../arg_values.js';
import type { BrowserSettings } from '../launch_config.js';

/** Node's options that take their value as the next word (`node -r ./setup.js train.js`). */
const kNodeValueFlags = new Set(['-r', '--require', '--import', '--loader', '--experimental-loader', '-C', '--conditions']);

export const kBrowserFlags = ['headless', 'browserScript', 'browserHost', 'httpsCert', 'httpsKey'] as const;

/**
 * The browser settings, or undefined without --browser (then none of its companion flags may
 * be given). `text(name)` reads a flag's value; `headless` is the boolean flag.
 */
export function parseBrowser(
  text: (name: string) => string | undefined,
  headless: boolean,
  command: string,
  args: readonly string[],
): BrowserSettings | undefined {
  const countText = text('browser');
  if (countText === undefined) {
    const given = kBrowserFlags.find((name) => (name === 'headless' ? headless : text(name) !== undefined));
    if (given !== undefined) throw new InvalidArgumentError(`--${flagName(given)} needs --browser <count>`);
    return undefined;
  }
  const count = parseCount('--browser', countText);
  const certFile = text('httpsCert');
  const keyFile = text('httpsKey');
  if ((certFile === undefined) !== (keyFile === undefined))
    throw new InvalidArgumentError('give --https-cert and --https-key together');
  const { host, port } = parseBrowserHost(text('browserHost') ?? '127.0.0.1');
  const given = text('browserScript');
  const nodeScript = scriptIndex(command, args);
  if (given === undefined && nodeScript === undefined) {
    throw new InvalidArgumentError(
      `--browser: cannot tell which script '${[command, ...args].join(' ')}' runs; give the browser ranks theirs with --browser-script <file>`,
    );
  }
  return {
    count,
    headless,
    script: given ?? (args[nodeScript as number] as string),
    args: nodeScript === undefined ? [] : args.slice(nodeScript + 1),
    host,
    port,
    ...(certFile !== undefined && keyFile !== undefined && { tls: { certFile, keyFile } }),
  };
}

/** host, host:port, [v6]:port. */
function parseBrowserHost(value: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]+))(?::(\d+))?$/.exec(value);
  if (match === null) throw new InvalidArgumentError(`--browser-host must be host or host:port, got '${value}'`);
  return { host: (match[1] ?? match[2]) as string, port: match[3] === undefined ? 0 : parsePort('--browser-host', match[3]) };
}

/** Where the script is in `node [options] script.js ...`; undefined for another command. */
function scriptIndex(command: string, args: readonly string[]): number | undefined {
  if (!/^node(\.exe)?$/.test(basename(command))) return undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (kNodeValueFlags.has(arg)) i++;
    else if (arg === '-e' || arg === '--eval' || arg === '-p' || arg === '--print') return undefined;
    else if (!arg.startsWith('-')) return i;
  }
  return undefined;
}

function flagName(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}
