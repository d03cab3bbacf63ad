/**
 * A self-contained HTML rendering of the OpenAPI document for /docs (development only): no
 * script, no CDN, one stylesheet served beside it, so it passes the pages' Content-Security-Policy.
 */

interface Operation {
  summary?: string;
  description?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: { name: string; in: string; required?: boolean; description?: string; schema?: unknown }[];
  requestBody?: { content?: Record<string, { schema?: unknown }> };
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: unknown }> }>;
}

export interface ReferenceDocument {
  info: { title: string; version: string; description?: string };
  paths?: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, unknown>; securitySchemes?: Record<string, { description?: string }> };
}

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string,
  );

/** Inline code (`x`) and nothing else of Markdown, escaped. */
const prose = (text = '') => escapeHtml(text).replace(/`([^`]+)`/g, '<code>$1</code>');

const schemaJson = (schema: unknown) =>
  `<pre>${escapeHtml(JSON.stringify(schema, null, 2)).replace(
    /&quot;\$ref&quot;: &quot;#\/components\/schemas\/([\w.-]+)&quot;/g,
    '&quot;$ref&quot;: <a href="#schema-$1">$1</a>',
  )}</pre>`;

function table(markdown: string) {
  const lines = markdown.split('\n').filter((l) => l.startsWith('|'));
  const cells = (line: string) =>
    line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
  const [head, , ...rows] = lines;
  if (!head) return '';
  return `<table><thead><tr>${cells(head)
    .map((c) => `<th>${prose(c)}</th>`)
    .join('')}</tr></thead><tbody>${rows
    .map(
      (r) =>
        `<tr>${cells(r)
          .map((c) => `<td>${prose(c)}</td>`)
          .join('')}</tr>`,
    )
    .join('')}</tbody></table>`;
}

function operationHtml(method: string, path: string, op: Operation) {
  const id = `${method}-${path}`.replace(/[^A-Za-z0-9]+/g, '-');
  const parts = [
    `<section class="op" id="${id}"><h3><span class="method ${method}">${method.toUpperCase()}</span> <code>${escapeHtml(path)}</code> — ${prose(op.summary)}</h3>`,
  ];
  if (op.description) parts.push(`<p>${prose(op.description)}</p>`);
  if (op.security?.length) {
    parts.push(
      `<p><strong>Authentication:</strong> ${op.security.map((s) => Object.keys(s).join(' + ')).join(' or ')}</p>`,
    );
  }
  if (op.parameters?.length) {
    parts.push(
      `<h4>Parameters</h4><table><thead><tr><th>name</th><th>in</th><th>required</th><th>meaning</th></tr></thead><tbody>${op.parameters
        .map(
          (p) =>
            `<tr><td><code>${escapeHtml(p.name)}</code></td><td>${escapeHtml(p.in)}</td><td>${p.required ? 'yes' : 'no'}</td><td>${prose(p.description ?? (p.schema as { description?: string } | undefined)?.description)}</td></tr>`,
        )
        .join('')}</tbody></table>`,
    );
  }
  for (const [type, media] of Object.entries(op.requestBody?.content ?? {})) {
    parts.push(`<h4>Request body <code>${escapeHtml(type)}</code></h4>${schemaJson(media.schema)}`);
  }
  parts.push('<h4>Responses</h4><dl>');
  for (const [status, response] of Object.entries(op.responses ?? {})) {
    parts.push(`<dt>${escapeHtml(status)}</dt><dd>${prose(response.description)}`);
    for (const [type, media] of Object.entries(response.content ?? {})) {
      parts.push(`<details><summary><code>${escapeHtml(type)}</code></summary>${schemaJson(media.schema)}</details>`);
    }
    parts.push('</dd>');
  }
  parts.push('</dl></section>');
  return { id, html: parts.join('\n') };
}

export function openApiReferencePage(document: ReferenceDocument): string {
  const byTag = new Map<string, { id: string; label: string; html: string }[]>();
  for (const [path, methods] of Object.entries(document.paths ?? {})) {
    for (const [method, op] of Object.entries(methods)) {
      const tag = op.tags?.[0] ?? 'Other';
      const rendered = operationHtml(method, path, op);
      const list = byTag.get(tag) ?? [];
      list.push({ ...rendered, label: `${method.toUpperCase()} ${path}` });
      byTag.set(tag, list);
    }
  }
  const description = document.info.description ?? '';
  const [intro = '', tableText = ''] = description.split(/\n\n(?=\|)/);
  const schemes = Object.entries(document.components?.securitySchemes ?? {});
  const schemas = Object.entries(document.components?.schemas ?? {});
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(document.info.title)} — reference</title><link rel="stylesheet" href="/docs/reference.css"></head>
<body><nav><h2>${escapeHtml(document.info.title)}</h2><p>version ${escapeHtml(document.info.version)} · <a href="/openapi.json">openapi.json</a></p>
${[...byTag]
  .map(
    ([tag, ops]) =>
      `<h3>${escapeHtml(tag)}</h3><ul>${ops.map((o) => `<li><a href="#${o.id}">${escapeHtml(o.label)}</a></li>`).join('')}</ul>`,
  )
  .join('\n')}</nav>
<main><h1>${escapeHtml(document.info.title)}</h1>
${intro
  .split('\n\n')
  .map((p) => `<p>${prose(p)}</p>`)
  .join('\n')}
<h2>Error codes</h2>${table(tableText)}
<h2>Authentication</h2><dl>${schemes.map(([name, s]) => `<dt>${escapeHtml(name)}</dt><dd>${prose(s.description)}</dd>`).join('')}</dl>
${[...byTag].map(([tag, ops]) => `<h2>${escapeHtml(tag)}</h2>${ops.map((o) => o.html).join('\n')}`).join('\n')}
<h2>Schemas</h2>${schemas.map(([name, schema]) => `<section id="schema-${escapeHtml(name)}"><h3>${escapeHtml(name)}</h3>${schemaJson(schema)}</section>`).join('\n')}
</main></body></html>`;
}

export const REFERENCE_CSS = `
body { margin: 0; display: grid; grid-template-columns: 18rem minmax(0, 1fr); font: 15px/1.5 system-ui, sans-serif; color: #1d2330; }
nav { position: sticky; top: 0; height: 100vh; overflow: auto; padding: 1rem; background: #f4f6fa; border-right: 1px solid #dde2ea; }
nav ul { list-style: none; padding: 0; margin: 0 0 1rem; } nav li { margin: .2rem 0; font-size: 13px; }
main { padding: 1rem 2rem; max-width: 60rem; }
.op { border: 1px solid #dde2ea; border-radius: 6px; padding: .25rem 1rem 1rem; margin: 1rem 0; }
.method { display: inline-block; min-width: 3.5rem; text-align: center; border-radius: 4px; color: #fff; font-size: 13px; padding: 0 .4rem; }
.get { background: #2f7d4a; } .post { background: #2c5fb8; }
pre { background: #f4f6fa; padding: .75rem; overflow: auto; font-size: 13px; }
table { border-collapse: collapse; } td, th { border: 1px solid #dde2ea; padding: .2rem .5rem; text-align: left; }
dt { font-weight: 600; margin-top: .5rem; }
@media (max-width: 50rem) { body { grid-template-columns: 1fr; } nav { position: static; height: auto; } }
`;
