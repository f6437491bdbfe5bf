/** The last `capacity` lines of a rank's output, kept to explain a failure after the fact. */
export class TailBuffer {
  private readonly lines: string[] = [];
  private next = 0;

  constructor(
    private readonly capacity: number,
    /** Longer lines are cut: the report should show where it failed, not a megabyte of JSON. */
    private readonly maxLineLength = 500,
  ) {}

  push(line: string): void {
    if (this.capacity <= 0) return;
    const kept = line.length > this.maxLineLength ? `${line.slice(0, this.maxLineLength)}...` : line;
    if (this.lines.length < this.capacity) this.lines.push(kept);
    else this.lines[this.next] = kept;
    this.next = (this.next + 1) % this.capacity;
  }

  /** Oldest first. */
  toArray(): string[] {
    if (this.lines.length < this.capacity) return [...this.lines];
    return [...this.lines.slice(this.next), ...this.lines.slice(0, this.next)];
  }
}
