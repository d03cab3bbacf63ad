# syntax=docker/dockerfile:1
# Parley gateway image. Multi-stage: dependencies and the compiled build (`npm run build`, which
# type-checks) in build stages, a slim runtime with production dependencies only, running as the
# unprivileged `node` user. The server runs compiled JavaScript (`node dist/main.js`), as CI
# tests it (the suite once more against dist/, see .ci/run); Node 24 LTS, one of the majors of
# package.json's engines.
ARG NODE_VERSION=24

FROM node:${NODE_VERSION}-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund

# Build: tsc compiles src/ to dist/ (and fails on a type error), page assets copied beside it.
FROM deps AS build
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

FROM node:${NODE_VERSION}-bookworm-slim AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000
WORKDIR /app
COPY --from=prod-deps --chown=node:node /app/node_modules ./node_modules
COPY --chown=node:node package.json ./
COPY --chown=node:node drizzle ./drizzle
COPY --from=build --chown=node:node /app/dist ./dist
# The real-time client the pages load (served from client/index.js).
COPY --chown=node:node client/index.js ./client/index.js
# Attachments (ATTACHMENTS_DIR): the local driver's files and every upload's scratch directory.
RUN mkdir -p /app/.data/attachments && chown -R node:node /app/.data
USER node
EXPOSE 3000
# Liveness: GET /healthz answers while the process serves HTTP (readiness is GET /readyz).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# SIGTERM: stop accepting, finish in-flight requests, close sockets (1001) and stores.
STOPSIGNAL SIGTERM
CMD ["node", "dist/main.js"]
