import { gzipSync } from 'node:zlib';

/** One file the widget loads: its served path, raw and gzipped bytes. */
export interface SizedFile {
  path: string;
  bytes: number;
  gzipped: number;
}

const gz = (body: Buffer) => gzipSync(body, { level: 9 }).length;

/**
 * What the widget costs, measured over HTTP against a running gateway, as a browser fetches it:
 * the loader (/widget.js), and the panel: its page, its stylesheet and every module it imports,
 * followed through their static imports (`import … from '/x.js'`, `'./x.js'`). Each file is
 * gzipped on its own (as a server's compression would send it).
 */
export async function measureWidget(baseUrl: string) {
  const fetchBytes = async (path: string) => {
    const res = await fetch(new URL(path, baseUrl));
    if (!res.ok) throw new Error(`${path} answered ${res.status}`);
    return Buffer.from(await res.arrayBuffer());
  };
  const sized = (path: string, body: Buffer): SizedFile => ({ path, bytes: body.length, gzipped: gz(body) });

  const loader = sized('/widget.js', await fetchBytes('/widget.js'));
  const framePath = '/widget/frame?appkey=demo-appkey';
  const html = await fetchBytes(framePath);
  const panel: SizedFile[] = [sized('/widget/frame', html)];
  const queue = [...html.toString('utf8').matchAll(/(?:src|href)="(\/[^"]+)"/g)].map((m) => m[1] as string);
  const seen = new Set<string>();
  while (queue.length > 0) {
    const path = queue.shift() as string;
    if (seen.has(path)) continue;
    seen.add(path);
    const body = await fetchBytes(path);
    panel.push(sized(path, body));
    if (!path.endsWith('.js')) continue;
    const source = body.toString('utf8');
    for (const m of source.matchAll(/(?:^|[\s;}])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]/g)) {
      queue.push(new URL(m[1] as string, new URL(path, 'http://x')).pathname);
    }
    for (const m of source.matchAll(/(?:^|[\s;}])import\s*['"]([^'"]+)['"]/g)) {
      queue.push(new URL(m[1] as string, new URL(path, 'http://x')).pathname);
    }
  }
  const total = (files: SizedFile[]) => files.reduce((sum, f) => sum + f.gzipped, 0);
  return { loader, panel, loaderGzipped: loader.gzipped, panelGzipped: total(panel) };
}
