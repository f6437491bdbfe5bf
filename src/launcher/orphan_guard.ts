/**
 * No rank outlives a ringrun that is killed outright (SIGKILL, the OOM killer, a crash).
 *
 * ringrun stops its ranks on every way out it sees (a failure, an interrupt, the end), but a
 * process killed with SIGKILL runs no code: its ranks, each the leader of its own process
 * group (process_group.ts), are reparented and go on, holding their ports, GPUs and peers. A
 * rank that writes a line dies of EPIPE; a quiet one, waiting in a collective or in its data
 * loader, runs until a peer or the store fails it, or forever.
 *
 * How it works: ringrun starts one small shell per run, the guard, in a session of its own (so
 * that a Ctrl-C or a kill of ringrun's group does not reach it), with a pipe to its stdin and
 * ringrun's stderr as its own. Each rank started is announced on the pipe (`+PGID:LABEL`), and
 * forgotten once its process has exited (`-PGID`, so that a pid reused later is never hit).
 * When the pipe reaches its end without `end` first, ringrun has died without stopping its
 * ranks: the guard says so on the stderr ringrun wrote to, sends SIGTERM (and SIGCONT, for a
 * stopped rank) to every group still announced, and SIGKILL to those left 1 s later. The pipe's
 * end comes from the kernel the moment ringrun's process is gone, so nothing polls while ringrun
 * lives. A ringrun that ends normally writes `end`: the guard leaves without a word.
 *
 * Remote ranks need no guard: their host's bootstrap stops them when the session's stdin ends
 * (remote_shell.ts), and ringrun's death ends it (ringrun holds the pipe's other end). mpirun is
 * announced as a rank: its own SIGTERM handling stops its ranks; so is the headless Chromium of
 * --headless (browser/headless.ts), whose tabs are ranks. Nothing else is touched, and a
 * program run by mpirun, torchrun or Slurm rather than ringrun has no guard at all.
 */
import { type ChildProcess, spawn } from 'node:child_process';

/** How long the guard waits after SIGTERM before it sends SIGKILL to what is left. */
export const kOrphanKillAfterMs = 1000;

/**
 * The guard, in POSIX sh ($1: ringrun's pid). G holds " PGID:LABEL " tokens, spaces of a label
 * written as '_'. Once it has said why, the guard lets go of ringrun's stderr, so that whoever
 * reads it sees its end without waiting for the guard. The wait after SIGTERM polls 5 times
 * 0.2 s (kOrphanKillAfterMs) and ends as soon as every group is gone (a group of zombies, where
 * nothing reaps the orphans, counts as there: it gets a harmless SIGKILL).
 */
const kScript = `G=" "
while IFS= read -r l; do
  case $l in
    end) exit 0 ;;
    +*) G="$G\${l#+} " ;;
    -*) p=\${l#-}; case $G in *" $p:"*) r=\${G#* $p:}; G="\${G%% $p:*} \${r#* }" ;; esac ;;
  esac
done
[ "$G" = " " ] && exit 0
set -f
W=""
for t in $G; do W="$W, $(IFS=_; set -- \${t#*:}; IFS=" "; echo "$*") (pid \${t%%:*})"; done
echo "ringrun: ringrun (pid $1) that started them is gone (killed, or crashed): stopping\${W#,} (SIGTERM, SIGKILL after ${kOrphanKillAfterMs / 1000} s)" >&2
exec 2>/dev/null
for t in $G; do kill -TERM -\${t%%:*}; kill -CONT -\${t%%:*}; done 2>/dev/null
for i in 1 2 3 4 5; do
  sleep 0.2; a=0
  for t in $G; do kill -0 -\${t%%:*} 2>/dev/null && a=1; done
  [ $a = 0 ] && exit 0
done
for t in $G; do kill -KILL -\${t%%:*}; done 2>/dev/null
exit 0
`;

/** The guard's command line (`sh -c SCRIPT ringrun-guard PID`; the name shows in ps). */
export function guardArgv(launcherPid: number): string[] {
  return ['sh', '-c', kScript, 'ringrun-guard', String(launcherPid)];
}

/** What a launcher tells the guard of the process groups it starts. */
export interface ProcessGuard {
  /** Guards the process group `pgid`, named `label` (`rank 3`, `mpirun`) in the guard's message. */
  watch(pgid: number, label: string): void;
  /** Forgets `pgid`: its leader has exited (ringrun stops what it left in its group itself). */
  unwatch(pgid: number): void;
}

/** The guard of one ringrun process; the shell starts at the first watch(). */
export class OrphanGuard implements ProcessGuard {
  private child: ChildProcess | undefined;
  private closed = false;
  private readonly onExit = () => this.close();

  constructor(private readonly launcherPid: number = process.pid) {}

  watch(pgid: number, label: string): void {
    if (this.closed) return;
    this.send(`+${pgid}:${label.replace(/[\s:]/g, '_')}`);
  }

  unwatch(pgid: number): void {
    if (this.child !== undefined) this.send(`-${pgid}`);
  }

  /** ringrun ends on purpose: the guard leaves, stopping nothing. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    process.off('exit', this.onExit);
    if (this.child === undefined) return;
    // A small write to an idle pipe goes out at once, even from an 'exit' handler.
    this.child.stdin?.end('end\n');
  }

  private send(line: string): void {
    if (this.closed) return;
    const stdin = this.start()?.stdin;
    if (stdin?.writable) stdin.write(`${line}\n`);
  }

  private start(): ChildProcess | undefined {
    if (this.child !== undefined) return this.child;
    try {
      const [command, ...args] = guardArgv(this.launcherPid);
      this.child = spawn(command as string, args, {
        stdio: ['pipe', 'ignore', 'inherit'],
        detached: true,
      });
    } catch {
      this.closed = true; // the guard cannot start: the job runs unguarded, as before it existed
      return undefined;
    }
    this.child.on('error', () => {
      this.closed = true; // no sh (ENOENT comes here, not from spawn): unguarded
    });
    this.child.stdin?.on('error', () => {}); // the guard gone (killed by someone): nothing to do
    // The guard must not keep ringrun alive, nor ringrun wait for it.
    this.child.unref();
    (this.child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    process.once('exit', this.onExit);
    return this.child;
  }
}
