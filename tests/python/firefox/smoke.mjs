// The playground in Firefox: Debian's firefox-esr driven over WebDriver BiDi by puppeteer-core
// (no geckodriver needed). A chat whose task list fills and ticks, then an approval. Run by
// tests/python/test_playground.py: node smoke.mjs <base url> <screenshot dir>.
import puppeteer from "puppeteer-core";

const [base, shots] = process.argv.slice(2);
const browser = await puppeteer.launch({
  browser: "firefox",
  executablePath: process.env.FIREFOX || "/usr/bin/firefox-esr",
  headless: true,
  defaultViewport: { width: 1280, height: 900 },
});
const errors = [];
try {
  const page = await browser.newPage();
  page.on("pageerror", (error) => errors.push(String(error)));
  await page.goto(`${base}/#resource=firefox`);
  await page.waitForSelector("#agent option");

  const status = () => page.$eval("#run-status", (el) => el.textContent);
  const waitStatus = (want) => page.waitForFunction((w) => document.getElementById("run-status").textContent === w, { timeout: 15000 }, want);
  const send = async (text) => {
    await page.type("#prompt", text);
    await page.keyboard.press("Enter");
  };

  await page.select("#agent", "worker");
  await send("Plan, Ship");
  await waitStatus("finished");
  await page.waitForFunction(() => document.querySelectorAll("#tasks .task.completed").length === 2, { timeout: 15000 });
  const answer = await page.$$eval(".msg.assistant .text", (els) => els.at(-1).textContent);
  if (answer !== "Done: Plan, Ship") throw new Error(`answer: ${JSON.stringify(answer)}`);
  await page.screenshot({ path: `${shots}/firefox-01-chat.png` });

  await page.select("#agent", "careful");
  await send("Review");
  await page.waitForSelector("#pending li button.approve", { timeout: 15000 });
  await page.click("#pending li button.approve");
  await waitStatus("finished");
  await page.screenshot({ path: `${shots}/firefox-02-approved.png` });
  if (errors.length) throw new Error(`page errors: ${errors.join("; ")}`);
  console.log(`firefox ${await browser.version()}: chat, task list and approval work (${await status()})`);
} finally {
  await browser.close();
}
