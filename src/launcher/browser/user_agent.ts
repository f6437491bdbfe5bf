/** A browser's User-Agent string, shortened to what a report needs: "Chrome 156 on Linux". */

const kBrowsers: readonly [RegExp, string][] = [
  [/Edg\/(\d+)/, 'Edge'],
  [/OPR\/(\d+)/, 'Opera'],
  [/Firefox\/(\d+)/, 'Firefox'],
  [/HeadlessChrome\/(\d+)/, 'headless Chrome'],
  [/Chrom(?:e|ium)\/(\d+)/, 'Chrome'],
  [/Version\/(\d+)[\d.]* (?:Mobile\/\S+ )?Safari/, 'Safari'],
];

const kSystems: readonly [RegExp, string][] = [
  [/Android/, 'Android'],
  [/iPhone|iPad/, 'iOS'],
  [/Windows/, 'Windows'],
  [/Mac OS X|Macintosh/, 'macOS'],
  [/CrOS/, 'ChromeOS'],
  [/Linux/, 'Linux'],
];

export function describeBrowser(userAgent: string): string {
  const text = userAgent.slice(0, 512);
  let browser = 'a browser';
  for (const [pattern, name] of kBrowsers) {
    const match = pattern.exec(text);
    if (match !== null) {
      browser = `${name} ${match[1]}`;
      break;
    }
  }
  const system = kSystems.find(([pattern]) => pattern.test(text))?.[1];
  return system === undefined ? browser : `${browser} on ${system}`;
}
