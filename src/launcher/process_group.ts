/**
 * Each rank runs as the leader of its own process group (spawn with `detached: true`, which
 * calls setsid). One kill(-pgid) then reaches the rank and everything it started that did not
 * leave the group itself: `sh -c` wrappers, their children, worker processes.
 */
import { readdirSync, readFileSync } from 'node:fs';

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** Sends `signal` to every process of the group. False when the group is already gone. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (error) {
    if (errorCode(error) === 'ESRCH' || errorCode(error) === 'EPERM') return false;
    throw error;
  }
}

/**
 * Whether the group still has a running process. kill(-pgid, 0) alone is not enough: it also
 * succeeds for zombies, and zombies of orphaned grandchildren linger forever where PID 1 does
 * not reap (containers, microVMs). On Linux we therefore look for a non-zombie member in /proc.
 */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (error) {
    if (errorCode(error) === 'ESRCH') return false;
  }
  return process.platform === 'linux' ? linuxGroupHasLiveMember(pgid) : true;
}

function linuxGroupHasLiveMember(pgid: number): boolean {
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return true; // no /proc: trust kill(-pgid, 0)
  }
  return pids.some((pid) => {
    const member = processState(Number(pid));
    return member !== undefined && member.pgrp === pgid && member.state !== 'Z' && member.state !== 'X';
  });
}

/** State letter and process group of a process, from /proc/<pid>/stat; undefined if it is gone. */
export function processState(pid: number): { state: string; pgrp: number } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0] ?? '?', pgrp: Number(fields[2]) };
}
