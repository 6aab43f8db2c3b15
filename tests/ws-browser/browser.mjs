// browser.mjs URL -- load URL#selftest in headless Chromium (Debian's
// /usr/bin/chromium, driven by playwright-core: no browser download) and
// wait for the page's self-test verdict in #result.  Prints the page's log
// and the verdict; exit 0 on "PASS ...", 1 otherwise, 2 when the browser
// cannot start.  Used by tests/integration/test_ws_browser.sh and (through
// HAProxy's TLS, BROWSER_IGNORE_HTTPS_ERRORS=1) test_haproxy_tls.sh.
import { chromium } from "playwright-core";

const url = process.argv[2];
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const timeout = Number(process.env.BROWSER_TIMEOUT_MS || 30000);

let browser;
try {
  browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run",
           "--disable-dev-shm-usage"],
    timeout,
  });
} catch (e) {
  console.error("cannot start " + executablePath + ": " + e.message);
  process.exit(2);
}
let code = 1;
try {
  // BROWSER_IGNORE_HTTPS_ERRORS=1: a test's self-signed certificate
  const page = await browser.newPage(
    { ignoreHTTPSErrors: process.env.BROWSER_IGNORE_HTTPS_ERRORS === "1" });
  page.on("console", m => console.log("console: " + m.text()));
  page.on("pageerror", e => console.log("page error: " + e.message));
  // BROWSER_PAGE_ONLY=1: load URL itself and print its <h1>, no self-test
  const only = process.env.BROWSER_PAGE_ONLY === "1";
  const resp = await page.goto(only ? url : url + "#selftest", { timeout });
  console.log("page: HTTP " + resp.status() + " " + resp.headers()["content-type"]);
  const proto = await page.evaluate(
    () => performance.getEntriesByType("navigation")[0].nextHopProtocol);
  console.log("page: protocol " + proto);
  if (only) {
    console.log("h1: " + await page.textContent("h1"));
    await browser.close();
    process.exit(resp.status() === 200 ? 0 : 1);
  }
  await page.waitForFunction(
    () => document.getElementById("result").textContent !== "not run", null, { timeout });
  const verdict = await page.textContent("#result");
  const log = await page.$$eval("#log div", ds => ds.map(d => d.textContent));
  for (const line of log)
    console.log("log: " + line);
  console.log("verdict: " + verdict);
  code = verdict.startsWith("PASS") ? 0 : 1;
} catch (e) {
  console.error("error: " + e.message);
} finally {
  await browser.close();
}
process.exit(code);
