// KafkaJS 2.2.4 harness for kbroker's compat suite, driven by compat-tests/kafkajskit.py (the Node
// counterpart of compat-tests/java/KbrokerHarness.java). One process per call; JSON lines in and out.
// Binary fields are base64 strings, null stays null; headers are [[key, b64value], ...] in wire order.
//
//   produce <bootstrap> <topic> <none|gzip|snappy|lz4|zstd> <acks: -1|1|0> <idempotent: 0|1>
//       stdin, one record a line: {"partition":p,"timestamp":ms|-1,"key":b64|null,"value":b64|null,
//       "headers":[[k,b64],...]}; all sent in one producer.send() (so one batch per partition).
//       stdout: {"event":"ack","i":n,"partition":p,"offset":o} per record (KafkaJS answers a base offset
//       per partition: record k of a partition is at base + k), then {"event":"done","n":N}
//   consume <bootstrap> <topic> <n> <timeout_ms> <beginning|p:off,...> [read_committed|read_uncommitted]
//       KafkaJS has no assign(): a consumer of a group of its own (never committed) that a fixed
//       assigner gives the partitions (all, or those named with an offset, then consumer.seek);
//       stdout: {"event":"record","partition","offset","timestamp","key","value","headers"} until n
//       records or the timeout, then {"event":"done","n":N,"positions":{p:o}}
//   txn-read <bootstrap> <topic> <read_committed|read_uncommitted> <timeout_ms> <p>:<end>[,...]
//       the same reader, from the beginning of those partitions until every position reaches its end
//       (positions move past control records and aborted transactions); records as txnkit expects
//       them ({"event":"record","partition","offset","key","value"} as text), then
//       {"event":"done","positions":{"p":o}}
//   group-member <bootstrap> <group> <topic> [session_timeout_ms]
//       a consumer-group member for compat-tests/groupkit.py (KafkaJS's own RoundRobinAssigner, its
//       only one): {"event":"assigned","partitions":[..]} after every join, {"event":"record",..} per
//       record, commitOffsets after each batch then {"event":"committed","offsets":{"p":next}},
//       {"event":"closed"} after SIGTERM disconnected the consumer (LeaveGroup), exit status 0
//   group-consume <bootstrap> <topic> <group> <n> <timeout_ms>
//       securitykit's consume_group: a member of <group> from the earliest offset reads n records
//       (record events as for consume), commits after each batch, leaves; {"event":"done","n":N}
//   txn-producer <bootstrap> <topic> <transactional.id> <transaction.timeout.ms>
//       the line protocol of compat-tests/txnkit.py (init | begin | send P:V[,..] | commit | abort |
//       offsets GROUP P:O[,..] | close), one JSON answer a line: {"op","ok":true[,"acks"]} or
//       {"op","ok":false,"error":"<name>: <message>","names":[error names and KafkaJS types, causes too]}
//   acked-producer <bootstrap> <topic> <partitions> <interval_ms> [per_send]
//       an idempotent acks=-1 producer for the cluster tests: value "v<i>" (key "<i>") to partition
//       floor(i / per_send) % partitions, per_send records (default 1) of one partition in each
//       producer.send() (see missingPartitions), one send after another (maxInFlightRequests 1),
//       interval_ms apart, until SIGTERM:
//       {"event":"acked","partition","offset","value"}, {"event":"failed","value","error"}, and last
//       {"event":"closed","sent":n}
//   admin <bootstrap>
//       stdin, one call a line: {"op":"<KafkaJS admin method>","args":[...]}; stdout, one line each:
//       {"op","ok":true,"result":...} or {"op","ok":false,"error":{name,type,code,message,retriable,
//       topic,errors:[...],cause}} (KafkaJS's own error objects, aggregated errors included).
//       describeGroups answers decoded member metadata and assignments.
//
// KBROKER_KAFKAJS_RETRIES=n: KafkaJS's retries of a failed call (default 10, 100 ms doubling to 2 s).
// KAFKAJS_LOG_LEVEL=debug|info|warn|error|nothing (default warn): KafkaJS's log, as JSON lines on
// stderr (debug shows every request and response KafkaJS sends and gets).
// KBROKER_KAFKAJS_SECURITY='{"ssl":{"ca":path,"cert":path,"key":path}|null,"sasl":{"mechanism":..,
// "username":..,"password":..,"token":..}|null}': TLS and SASL for every client (securitykit's terms).
'use strict'

const fs = require('fs')
const crypto = require('crypto')
const readline = require('readline')
const {
  Kafka,
  logLevel,
  CompressionTypes,
  CompressionCodecs,
  AssignerProtocol,
  Partitioners,
} = require('kafkajs')

CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}
const LEVELS = {
  nothing: logLevel.NOTHING,
  error: logLevel.ERROR,
  warn: logLevel.WARN,
  info: logLevel.INFO,
  debug: logLevel.DEBUG,
}
const LEVEL_NAMES = Object.fromEntries(Object.entries(LEVELS).map(([k, v]) => [v, k.toUpperCase()]))

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

const b64 = buf => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))
const unb64 = s => (s === null || s === undefined ? null : Buffer.from(s, 'base64'))
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// ---- errors ------------------------------------------------------------------------------------

function errorInfo(e, depth = 0) {
  if (!e || typeof e !== 'object' || depth > 5) return e === undefined ? null : String(e)
  const info = { name: e.name, message: e.message }
  for (const k of ['type', 'code', 'retriable', 'topic', 'partition', 'broker', 'groupId']) {
    if (e[k] !== undefined) info[k] = e[k]
  }
  if (Array.isArray(e.errors)) info.errors = e.errors.map(x => errorInfo(x, depth + 1))
  if (e.cause) info.cause = errorInfo(e.cause, depth + 1)
  return info
}

/** The error's name and KafkaJS type, then its causes' and aggregated errors' (txnkit's "names"). */
function errorNames(e, out = [], depth = 0) {
  if (!e || typeof e !== 'object' || depth > 5) return out
  if (e.name) out.push(e.name)
  if (e.type) out.push(e.type)
  if (Array.isArray(e.errors)) e.errors.forEach(x => errorNames(x, out, depth + 1))
  if (e.cause) errorNames(e.cause, out, depth + 1)
  return out
}

// ---- the client --------------------------------------------------------------------------------

function logCreator() {
  return ({ namespace, level, label, log }) => {
    const { message, timestamp, ...extra } = log
    let rest
    try {
      rest = JSON.stringify(extra, (k, v) => (v && v.type === 'Buffer' && Array.isArray(v.data) ? `<${v.data.length} bytes>` : v))
    } catch (e) {
      rest = '{}'
    }
    process.stderr.write(`${timestamp} ${label || LEVEL_NAMES[level]} [${namespace}] ${message} ${rest}\n`)
  }
}

function security() {
  const raw = process.env.KBROKER_KAFKAJS_SECURITY
  if (!raw) return {}
  const sec = JSON.parse(raw)
  const out = {}
  if (sec.ssl) {
    out.ssl = { rejectUnauthorized: true, ca: [fs.readFileSync(sec.ssl.ca, 'utf8')] }
    if (sec.ssl.cert) {
      out.ssl.cert = fs.readFileSync(sec.ssl.cert, 'utf8')
      out.ssl.key = fs.readFileSync(sec.ssl.key, 'utf8')
    }
  }
  if (sec.sasl) {
    const mechanism = sec.sasl.mechanism.toLowerCase()
    out.sasl =
      mechanism === 'oauthbearer'
        ? { mechanism, oauthBearerProvider: async () => ({ value: sec.sasl.token }) }
        : { mechanism, username: sec.sasl.username, password: sec.sasl.password }
  }
  return out
}

function client(bootstrap, retry) {
  return new Kafka({
    clientId: process.env.KBROKER_KAFKAJS_CLIENT_ID || 'kbroker-compat-kafkajs',
    brokers: bootstrap.split(','),
    logLevel: LEVELS[(process.env.KAFKAJS_LOG_LEVEL || 'warn').toLowerCase()] ?? logLevel.WARN,
    logCreator,
    connectionTimeout: 3000,
    requestTimeout: 30000,
    retry: retry || { initialRetryTime: 100, maxRetryTime: 2000, retries: Number(process.env.KBROKER_KAFKAJS_RETRIES || 10) },
    ...security(),
  })
}

async function stdinLines() {
  const lines = []
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
  for await (const line of rl) if (line.trim()) lines.push(line)
  return lines
}

/** KafkaJS takes headers as an object: a repeated key is an array of its values (sent together). */
function headersObject(pairs) {
  const out = {}
  for (const [k, v] of pairs || []) {
    const value = unb64(v)
    if (!(k in out)) out[k] = value
    else if (Array.isArray(out[k])) out[k].push(value)
    else out[k] = [out[k], value]
  }
  return out
}

/** ...and gives them back as one: flattened, a key's values in order. */
function headerPairs(obj) {
  const out = []
  for (const [k, v] of Object.entries(obj || {})) {
    for (const one of Array.isArray(v) ? v : [v]) out.push([k, b64(one)])
  }
  return out
}

/** Each message's offset: KafkaJS answers one base offset per partition of a send. */
function offsetsOf(partitionsInSendOrder, metadata) {
  const base = {}
  for (const r of metadata) base[r.partition] = Number(r.baseOffset)
  const seen = {}
  return partitionsInSendOrder.map(p => {
    const k = seen[p] || 0
    seen[p] = k + 1
    return base[p] === undefined || base[p] < 0 ? -1 : base[p] + k
  })
}

// ---- produce -----------------------------------------------------------------------------------

async function produce([bootstrap, topic, codec, acks, idempotent]) {
  const records = (await stdinLines()).map(l => JSON.parse(l))
  if (!(codec in CODECS)) throw new Error(`unknown codec ${codec}`)
  const idem = idempotent === '1'
  const producer = client(bootstrap).producer({
    idempotent: idem,
    maxInFlightRequests: idem ? 1 : undefined,
    createPartitioner: Partitioners.DefaultPartitioner,
  })
  await producer.connect()
  try {
    const messages = records.map(r => ({
      partition: r.partition,
      key: unb64(r.key),
      value: unb64(r.value),
      timestamp: r.timestamp >= 0 ? String(r.timestamp) : undefined,
      headers: headersObject(r.headers),
    }))
    const metadata = await producer.send({ topic, acks: Number(acks), compression: CODECS[codec], messages })
    const missing = Number(acks) === 0 ? [] : missingPartitions(records.map(r => r.partition), metadata)
    if (missing.length) throw new Error(`KafkaJS resolved send() without an answer for partitions ${missing}`)
    const offsets = offsetsOf(records.map(r => r.partition), metadata)
    records.forEach((r, i) => emit({ event: 'ack', i, partition: r.partition, offset: offsets[i] }))
    emit({ event: 'done', n: records.length })
  } finally {
    await producer.disconnect()
  }
}

// ---- reading without a group's say: a group of one, a fixed assignment, nothing committed ------

function fixedAssigner(topic, partitions) {
  const name = 'KbrokerFixedAssigner'
  return () => ({
    name,
    version: 0,
    async assign({ members }) {
      const ids = members.map(m => m.memberId).sort()
      return ids.map((memberId, i) => ({
        memberId,
        memberAssignment: AssignerProtocol.MemberAssignment.encode({
          version: 0,
          assignment: i === 0 ? { [topic]: partitions } : {},
          userData: Buffer.alloc(0),
        }),
      }))
    },
    protocol({ topics }) {
      return {
        name,
        metadata: AssignerProtocol.MemberMetadata.encode({ version: 0, topics, userData: Buffer.alloc(0) }),
      }
    },
  })
}

async function partitionsOf(kafka, topic) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    const { topics } = await admin.fetchTopicMetadata({ topics: [topic] })
    return topics[0].partitions.map(p => p.partitionId).sort((a, b) => a - b)
  } finally {
    await admin.disconnect()
  }
}

/** Read `partitions` (null: all) from the beginning, or from `seeks`; `onRecord`, then `done(positions)`. */
async function read({ bootstrap, topic, isolation, partitions, seeks, timeoutMs, onRecord, done }) {
  const kafka = client(bootstrap)
  const parts = partitions || (await partitionsOf(kafka, topic))
  const consumer = kafka.consumer({
    groupId: `kafkajs-harness-${crypto.randomBytes(5).toString('hex')}`,
    readUncommitted: isolation === 'read_uncommitted',
    partitionAssigners: [fixedAssigner(topic, parts)],
    maxWaitTimeInMs: 200,
    sessionTimeout: 10000,
    heartbeatInterval: 1000,
  })
  const positions = {}
  const moved = (p, lastOffset) => {
    positions[p] = Math.max(positions[p] ?? -1, Number(lastOffset) + 1)
  }
  // a batch whose records were all filtered out (markers, aborted records) moves the position too
  consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
    if (payload.lastOffset !== null && payload.lastOffset !== undefined) moved(payload.partition, payload.lastOffset)
  })
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        for (const m of batch.messages) onRecord(batch.partition, m)
        moved(batch.partition, batch.lastOffset())
      },
    })
    for (const [p, o] of Object.entries(seeks || {})) consumer.seek({ topic, partition: Number(p), offset: String(o) })
    const deadline = Date.now() + timeoutMs
    while (!done(positions) && Date.now() < deadline) await sleep(50)
  } finally {
    await consumer.disconnect()
  }
  return positions
}

function recordEvent(partition, m) {
  return {
    event: 'record',
    partition,
    offset: Number(m.offset),
    timestamp: Number(m.timestamp),
    key: b64(m.key),
    value: b64(m.value),
    headers: headerPairs(m.headers),
  }
}

async function consume([bootstrap, topic, n, timeoutMs, seek, isolation]) {
  let seeks = null
  let partitions = null
  if (seek !== 'beginning') {
    seeks = Object.fromEntries(seek.split(',').map(po => po.split(':').map(Number)))
    partitions = Object.keys(seeks).map(Number)
  }
  let count = 0
  const positions = await read({
    bootstrap,
    topic,
    isolation: isolation || 'read_uncommitted',
    partitions,
    seeks,
    timeoutMs: Number(timeoutMs),
    onRecord: (p, m) => {
      count++
      emit(recordEvent(p, m))
    },
    done: () => count >= Number(n),
  })
  emit({ event: 'done', n: count, positions })
}

async function txnRead([bootstrap, topic, isolation, timeoutMs, spec]) {
  const ends = Object.fromEntries(spec.split(',').map(pe => pe.split(':').map(Number)))
  const text = b => (b === null ? '' : b.toString())
  const positions = await read({
    bootstrap,
    topic,
    isolation,
    partitions: Object.keys(ends).map(Number),
    seeks: null,
    timeoutMs: Number(timeoutMs),
    onRecord: (p, m) =>
      emit({ event: 'record', partition: p, offset: Number(m.offset), key: text(m.key), value: text(m.value) }),
    done: pos => Object.entries(ends).every(([p, end]) => end <= 0 || (pos[p] ?? -1) >= end),
  })
  emit({ event: 'done', positions })
}

// ---- a consumer-group member (groupkit) --------------------------------------------------------

async function groupMember([bootstrap, group, topic, sessionTimeoutMs]) {
  const consumer = client(bootstrap).consumer({
    groupId: group,
    sessionTimeout: Number(sessionTimeoutMs || 30000),
    heartbeatInterval: 1000,
    maxWaitTimeInMs: 250,
  })
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    emit({ event: 'assigned', partitions: [...(payload.memberAssignment[topic] || [])].sort((a, b) => a - b) })
  })
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    process.stderr.write(`consumer crash: ${JSON.stringify(errorInfo(payload.error))} restart=${payload.restart}\n`)
  })
  let stopping = false
  process.on('SIGTERM', async () => {
    if (stopping) return
    stopping = true
    try {
      await consumer.disconnect()
      emit({ event: 'closed' })
      process.exit(0)
    } catch (e) {
      process.stderr.write(`disconnect failed: ${e.stack}\n`)
      process.exit(1)
    }
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch, resolveOffset, isRunning, isStale }) => {
      let last = null
      for (const m of batch.messages) {
        if (!isRunning() || isStale()) break
        emit({ event: 'record', partition: batch.partition, offset: Number(m.offset), key: m.key ? m.key.toString() : null })
        resolveOffset(m.offset)
        last = Number(m.offset)
      }
      if (last !== null) {
        const next = last + 1
        await consumer.commitOffsets([{ topic, partition: batch.partition, offset: String(next) }])
        emit({ event: 'committed', offsets: { [batch.partition]: next } })
      }
    },
  })
  await new Promise(() => {}) // until SIGTERM (or SIGKILL)
}

/** securitykit's consume_group: subscribe in `group` from the earliest offset, read n records
 * (or until the timeout), commit what was read, leave the group. */
async function groupConsume([bootstrap, topic, group, n, timeoutMs]) {
  const consumer = client(bootstrap).consumer({ groupId: group, maxWaitTimeInMs: 250, heartbeatInterval: 1000 })
  let count = 0
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch, resolveOffset }) => {
        let last = null
        for (const m of batch.messages) {
          if (count >= Number(n)) break
          count++
          emit(recordEvent(batch.partition, m))
          resolveOffset(m.offset)
          last = Number(m.offset)
        }
        if (last !== null) await consumer.commitOffsets([{ topic, partition: batch.partition, offset: String(last + 1) }])
      },
    })
    const deadline = Date.now() + Number(timeoutMs)
    while (count < Number(n) && Date.now() < deadline) await sleep(50)
  } finally {
    await consumer.disconnect()
  }
  emit({ event: 'done', n: count })
}

// ---- a transactional producer (txnkit) ---------------------------------------------------------

async function txnProducer([bootstrap, topic, transactionalId, timeoutMs]) {
  const producer = client(bootstrap).producer({
    transactionalId,
    idempotent: true,
    maxInFlightRequests: 1,
    transactionTimeout: Number(timeoutMs),
    createPartitioner: Partitioners.DefaultPartitioner,
  })
  let txn = null
  const ops = {
    init: async () => producer.connect(), // with a transactional id: InitProducerId for it
    begin: async () => {
      txn = await producer.transaction()
    },
    send: async arg => {
      if (!txn) throw new Error('no transaction begun')
      const recs = arg.split(',').map(pv => {
        const i = pv.indexOf(':')
        return { partition: Number(pv.slice(0, i)), value: pv.slice(i + 1) }
      })
      const metadata = await txn.send({
        topic,
        acks: -1,
        messages: recs.map(r => ({ partition: r.partition, key: r.value, value: r.value })),
      })
      const missing = missingPartitions(recs.map(r => r.partition), metadata)
      if (missing.length) throw new Error(`KafkaJS resolved send() without an answer for partitions ${missing}`)
      const offsets = offsetsOf(recs.map(r => r.partition), metadata)
      return { acks: recs.map((r, i) => [r.partition, offsets[i]]) }
    },
    commit: async () => {
      if (!txn) throw new Error('no transaction begun')
      await txn.commit()
    },
    abort: async () => {
      if (!txn) throw new Error('no transaction begun')
      await txn.abort()
    },
    offsets: async arg => {
      if (!txn) throw new Error('no transaction begun')
      const [group, spec] = arg.split(' ')
      const partitions = spec.split(',').map(po => {
        const [p, o] = po.split(':')
        return { partition: Number(p), offset: o }
      })
      await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions }] })
    },
    close: async () => producer.disconnect(),
  }
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
  for await (const line of rl) {
    const trimmed = line.trim()
    if (!trimmed) continue
    const sp = trimmed.indexOf(' ')
    const op = sp < 0 ? trimmed : trimmed.slice(0, sp)
    const arg = sp < 0 ? '' : trimmed.slice(sp + 1)
    try {
      if (!(op in ops)) throw new Error(`unknown command ${op}`)
      const extra = (await ops[op](arg)) || {}
      emit({ op, ok: true, ...extra })
    } catch (e) {
      emit({ op, ok: false, error: `${e.name}: ${e.message}`, names: errorNames(e), detail: errorInfo(e) })
    }
    if (op === 'close') break
  }
  process.exit(0)
}

// ---- an acks=-1 idempotent producer for the cluster tests --------------------------------------

// KafkaJS 2.2.4's send() keeps the answers of a send per broker across its retries: when a leader
// dies and its partitions move to a broker that already answered for other partitions of the same
// send, those partitions are never sent again and send() resolves without them (KafkaJS issue #1303,
// pull request #1798); the idempotent producer then reuses their sequence numbers for the next batch,
// which any broker takes for a duplicate of the batch that did reach the log. One partition a send
// keeps every send on one leader. (`produce` and `txn-producer` check every partition is answered.)
function missingPartitions(partitions, metadata) {
  const answered = new Set(metadata.map(r => r.partition))
  return [...new Set(partitions)].filter(p => !answered.has(p))
}

async function ackedProducer([bootstrap, topic, partitions, intervalMs, perSend]) {
  const P = Number(partitions)
  const per = Number(perSend || 1)
  const producer = client(bootstrap).producer({
    idempotent: true,
    maxInFlightRequests: 1,
    createPartitioner: Partitioners.DefaultPartitioner,
    // idempotent: KafkaJS retries forever by default; bounded here (KafkaJS warns about that)
    retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 200 },
  })
  let stopping = false
  process.on('SIGTERM', () => {
    stopping = true
  })
  await producer.connect()
  let sent = 0
  for (let round = 0; !stopping; round++) {
    // record i ("v<i>") goes to partition floor(i / per_send) % partitions: one partition a send
    const partition = round % P
    const batch = []
    for (let k = 0; k < per; k++, sent++) batch.push({ partition, key: String(sent), value: `v${sent}` })
    try {
      const metadata = await producer.send({ topic, acks: -1, messages: batch })
      const missing = missingPartitions([partition], metadata)
      if (missing.length) throw new Error(`KafkaJS resolved send() without an answer for partitions ${missing}`)
      const offsets = offsetsOf(batch.map(m => m.partition), metadata)
      batch.forEach((m, i) => emit({ event: 'acked', partition: m.partition, offset: offsets[i], value: m.value }))
    } catch (e) {
      for (const m of batch) emit({ event: 'failed', value: m.value, error: `${e.name}: ${e.message}`, names: errorNames(e) })
    }
    if (Number(intervalMs) > 0) await sleep(Number(intervalMs))
  }
  await producer.disconnect()
  emit({ event: 'closed', sent })
  process.exit(0)
}

// ---- admin -------------------------------------------------------------------------------------

function decodeGroups(result) {
  return {
    groups: result.groups.map(g => ({
      ...g,
      members: g.members.map(m => {
        const meta = m.memberMetadata && m.memberMetadata.length ? AssignerProtocol.MemberMetadata.decode(m.memberMetadata) : null
        const asg = m.memberAssignment && m.memberAssignment.length ? AssignerProtocol.MemberAssignment.decode(m.memberAssignment) : null
        return {
          memberId: m.memberId,
          clientId: m.clientId,
          clientHost: m.clientHost,
          topics: meta ? meta.topics : null,
          assignment: asg ? asg.assignment : null,
        }
      }),
    })),
  }
}

function jsonable(value) {
  return JSON.parse(
    JSON.stringify(value, (k, v) => (v && v.type === 'Buffer' && Array.isArray(v.data) ? { b64: Buffer.from(v.data).toString('base64') } : v))
  )
}

async function admin([bootstrap]) {
  const calls = (await stdinLines()).map(l => JSON.parse(l))
  const adm = client(bootstrap).admin()
  await adm.connect()
  try {
    for (const { op, args } of calls) {
      try {
        if (typeof adm[op] !== 'function') throw new Error(`KafkaJS admin has no ${op}`)
        let result = await adm[op](...(args || []))
        if (op === 'describeGroups') result = decodeGroups(result)
        emit({ op, ok: true, result: result === undefined ? null : jsonable(result) })
      } catch (e) {
        emit({ op, ok: false, error: errorInfo(e) })
      }
    }
  } finally {
    await adm.disconnect()
  }
}

// ------------------------------------------------------------------------------------------------

const COMMANDS = {
  produce,
  consume,
  'txn-read': txnRead,
  'group-member': groupMember,
  'group-consume': groupConsume,
  'txn-producer': txnProducer,
  'acked-producer': ackedProducer,
  admin,
}

async function main() {
  const [cmd, ...args] = process.argv.slice(2)
  if (cmd === 'version') {
    emit({ kafkajs: require('kafkajs/package.json').version, node: process.version })
    return
  }
  if (!(cmd in COMMANDS)) {
    process.stderr.write(`usage: node harness.js <${Object.keys(COMMANDS).join('|')}|version> ...\n`)
    process.exit(2)
  }
  await COMMANDS[cmd](args)
}

main().then(
  () => process.exit(0),
  e => {
    emit({ event: 'error', error: errorInfo(e), names: errorNames(e) })
    process.stderr.write(`${e.stack}\n`)
    process.exit(1)
  }
)
