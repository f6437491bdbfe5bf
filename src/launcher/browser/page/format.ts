/**
 * console.log's arguments as one line of text, close to what Node prints: strings as they are,
 * errors with their stack, other values inspected briefly. `%s`, `%d`, `%i`, `%f`, `%o`, `%O`
 * and `%j` in a leading string take the next arguments.
 */

const kMaxDepth = 3;
const kMaxItems = 50;

export function formatLine(args: readonly unknown[]): string {
  const rest = [...args];
  let head = '';
  if (typeof rest[0] === 'string' && /%[sdifoOj%]/.test(rest[0])) {
    const format = rest.shift() as string;
    head = format.replace(/%([sdifoOj%])/g, (match, spec: string) => {
      if (spec === '%') return '%';
      if (rest.length === 0) return match;
      const value = rest.shift();
      if (spec === 's') return typeof value === 'string' ? value : inspect(value, 1);
      if (spec === 'd' || spec === 'i') return String(spec === 'i' ? Math.trunc(Number(value)) : Number(value));
      if (spec === 'f') return String(Number(value));
      if (spec === 'j') return JSON.stringify(value) ?? 'undefined';
      return inspect(value, 0);
    });
  }
  const parts = rest.map((value) => (typeof value === 'string' ? value : inspect(value, 0)));
  return (head === '' ? parts : [head, ...parts]).join(' ');
}

function inspect(value: unknown, depth: number): string {
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'string') return depth === 0 ? value : `'${value}'`;
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'number' && Object.is(value, -0)) return '-0';
  if (typeof value !== 'object' && typeof value !== 'function') return String(value);
  if (typeof value === 'function') return `[Function: ${value.name || '(anonymous)'}]`;
  if (value instanceof Error) return value.stack?.includes(value.message) ? value.stack : `${value.name}: ${value.message}`;
  if (depth >= kMaxDepth) return Array.isArray(value) ? '[Array]' : '[Object]';
  if (ArrayBuffer.isView(value) && !(value instanceof DataView)) {
    const items = Array.from(value as unknown as ArrayLike<number | bigint>);
    const shown = items.slice(0, kMaxItems).map((item) => inspect(item, depth + 1));
    const more = items.length > kMaxItems ? `, ... ${items.length - kMaxItems} more items` : '';
    return `${value.constructor.name}(${items.length}) [ ${shown.join(', ')}${more} ]`;
  }
  if (Array.isArray(value)) {
    const shown = value.slice(0, kMaxItems).map((item) => inspect(item, depth + 1));
    const more = value.length > kMaxItems ? `, ... ${value.length - kMaxItems} more items` : '';
    return `[ ${shown.join(', ')}${more} ]`;
  }
  if (value instanceof Map) {
    const entries = [...value].slice(0, kMaxItems).map(([k, v]) => `${inspect(k, depth + 1)} => ${inspect(v, depth + 1)}`);
    return `Map(${value.size}) { ${entries.join(', ')} }`;
  }
  if (value instanceof Set) {
    return `Set(${value.size}) { ${[...value]
      .slice(0, kMaxItems)
      .map((item) => inspect(item, depth + 1))
      .join(', ')} }`;
  }
  if (value instanceof Date) return value.toISOString();
  const entries = Object.entries(value as Record<string, unknown>)
    .slice(0, kMaxItems)
    .map(([key, item]) => `${/^[A-Za-z_$][\w$]*$/.test(key) ? key : `'${key}'`}: ${inspect(item, depth + 1)}`);
  const name = (value as { constructor?: { name?: string } }).constructor?.name;
  const prefix = name && name !== 'Object' ? `${name} ` : '';
  return entries.length === 0 ? `${prefix}{}` : `${prefix}{ ${entries.join(', ')} }`;
}
