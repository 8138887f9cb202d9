// The independent IAM oracle's process: reads a JSON array of iam-simulate `Simulation`s on stdin and prints one JSON
// array, in the same order, of {result, errors, ignoredContextKeys}. A test-only tool (tests/support/iam_oracle.py
// runs it once per batch): @cloud-copilot/iam-simulate is AGPL-3.0, run here as a separate process, never shipped
// with or imported by the product.
import { runSimulation } from '@cloud-copilot/iam-simulate'

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const simulations = JSON.parse(Buffer.concat(chunks).toString('utf8'))

const answers = []
for (const simulation of simulations) {
  const response = await runSimulation(simulation, { simulationMode: 'Strict' })
  if (response.resultType === 'error') {
    answers.push({ result: null, errors: response.errors, ignoredContextKeys: [] })
  } else if (response.resultType === 'single') {
    answers.push({
      result: response.overallResult,
      errors: null,
      ignoredContextKeys: response.result.ignoredContextKeys ?? []
    })
  } else {
    const ignored = new Set(response.results.flatMap((one) => one.ignoredContextKeys ?? []))
    answers.push({ result: response.overallResult, errors: null, ignoredContextKeys: [...ignored] })
  }
}
process.stdout.write(JSON.stringify(answers))
