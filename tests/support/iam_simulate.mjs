// The independent IAM oracle's process: reads iam-simulate `Simulation`s on stdin, one JSON object per line, and
// answers each as it arrives with one line of JSON, in the same order: {result, errors, ignoredContextKeys}. A
// test-only tool (tests/support/iam_oracle.py runs one per pytest process): @cloud-copilot/iam-simulate is AGPL-3.0,
// run here as a separate process, never shipped with or imported by the product.
import { createInterface } from 'node:readline'
import { runSimulation } from '@cloud-copilot/iam-simulate'

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (!line.trim()) continue
  const response = await runSimulation(JSON.parse(line), { simulationMode: 'Strict' })
  let answer
  if (response.resultType === 'error') {
    answer = { result: null, errors: response.errors, ignoredContextKeys: [] }
  } else if (response.resultType === 'single') {
    answer = {
      result: response.overallResult,
      errors: null,
      ignoredContextKeys: response.result.ignoredContextKeys ?? []
    }
  } else {
    const ignored = new Set(response.results.flatMap((one) => one.ignoredContextKeys ?? []))
    answer = { result: response.overallResult, errors: null, ignoredContextKeys: [...ignored] }
  }
  process.stdout.write(JSON.stringify(answer) + '\n')
}
