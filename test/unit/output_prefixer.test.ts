import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { OutputPrefixer } from '../../src/launcher/output_prefixer.js';
import { TailBuffer } from '../../src/launcher/tail_buffer.js';

/** A prefixer whose writes and lines are recorded. */
function recorder(maxLineLength?: number) {
  const writes: string[] = [];
  const lines: string[] = [];
  const prefixer = new OutputPrefixer(
    '[1] ',
    (text) => writes.push(text),
    (line) => lines.push(line),
    maxLineLength,
  );
  return { prefixer, writes, lines, text: () => writes.join('') };
}

describe('OutputPrefixer', () => {
  it('prefixes every line and writes the lines of one chunk in one call', () => {
    const { prefixer, writes, lines } = recorder();
    prefixer.push('a\nb\n');
    assert.deepEqual(writes, ['[1] a\n[1] b\n']);
    assert.deepEqual(lines, ['a', 'b']);
  });

  it('holds a partial line until its end arrives', () => {
    const { prefixer, writes, text } = recorder();
    prefixer.push('hel');
    assert.deepEqual(writes, []);
    prefixer.push('lo\nwor');
    prefixer.push('ld\n');
    assert.equal(text(), '[1] hello\n[1] world\n');
  });

  it('turns CRLF into LF, also when a chunk ends between CR and LF', () => {
    const { prefixer, text, lines } = recorder();
    prefixer.push('one\r\ntwo\r');
    prefixer.push('\nthree\r\n');
    assert.equal(text(), '[1] one\n[1] two\n[1] three\n');
    assert.deepEqual(lines, ['one', 'two', 'three']);
  });

  it('keeps a lone CR inside a line', () => {
    const { prefixer, text } = recorder();
    prefixer.push('10%\r20%\n');
    assert.equal(text(), '[1] 10%\r20%\n');
  });

  it('keeps empty lines', () => {
    const { prefixer, text } = recorder();
    prefixer.push('\n\nx\n');
    assert.equal(text(), '[1] \n[1] \n[1] x\n');
  });

  it('flushes the last partial line at end, with a newline', () => {
    const { prefixer, text } = recorder();
    prefixer.push('done\nno newline');
    prefixer.end();
    assert.equal(text(), '[1] done\n[1] no newline\n');
  });

  it('writes nothing at end when the output ended with a newline', () => {
    const { prefixer, writes } = recorder();
    prefixer.push('x\n');
    prefixer.end();
    assert.deepEqual(writes, ['[1] x\n']);
  });

  it('does not split a UTF-8 character cut between chunks', () => {
    const { prefixer, text } = recorder();
    const bytes = Buffer.from('née 😀\n', 'utf8');
    for (let i = 0; i < bytes.length; i++) prefixer.push(bytes.subarray(i, i + 1));
    assert.equal(text(), '[1] née 😀\n');
  });

  it('cuts a line longer than the limit, so memory stays bounded', () => {
    const { prefixer, text } = recorder(4);
    prefixer.push('abcdefghij');
    assert.equal(text(), '[1] abcd\n[1] efgh\n');
    prefixer.end();
    assert.equal(text(), '[1] abcd\n[1] efgh\n[1] ij\n');
  });
});

describe('TailBuffer', () => {
  it('keeps the last lines, oldest first', () => {
    const tail = new TailBuffer(3);
    assert.deepEqual(tail.toArray(), []);
    for (const line of ['1', '2']) tail.push(line);
    assert.deepEqual(tail.toArray(), ['1', '2']);
    for (const line of ['3', '4', '5']) tail.push(line);
    assert.deepEqual(tail.toArray(), ['3', '4', '5']);
  });

  it('cuts very long lines', () => {
    const tail = new TailBuffer(1, 5);
    tail.push('0123456789');
    assert.deepEqual(tail.toArray(), ['01234...']);
  });
});
