"""The docs describe the product: a size cap on every page and on all of docs/ together, no word of how the work was
organised nor of its history, and every relative link (and its #anchor) pointing at a file and heading that exist."""
import re

from absl.testing import absltest, parameterized

from tests.helpers import REPO

DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = DOCS + [REPO / "README.md"]
# A newcomer reads docs/ whole: each page stays short, and so do all of them together (the README's 12 KB is checked
# in tests/test_layout.py). A page that grows past its cap moves its depth to another page, or cuts it.
PAGE_CAP = 16 * 1024
DOCS_CAP = 120 * 1024
# Words about how the work was done rather than what the code does: sessions, issue numbers.
ORGANISATION_WORDS = re.compile(r"\bsessions?\b|\bissues? ?#?\d+|\bPR ?#\d+", re.IGNORECASE)
# Words of the product's history rather than the product: commit ranges (abc1234..def5678, 9816f78-8009522) and commit
# ids (7 to 40 hex digits with a letter and a digit), "previous", "next window", "since then".
HISTORY_WORDS = re.compile(r"\b[0-9a-f]{7,40} ?(?:\.\.\.?|[-\u2013]) ?[0-9a-f]{7,40}\b"
                           r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"
                           r"|\bprevious\w*|\bnext window|\bsince then\b", re.IGNORECASE)
LINK = re.compile(r"\]\(([^)\s]+?\.md)(#[^)\s]*)?\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.MULTILINE)


def anchors(page):
    """GitHub's heading anchors: lower case, punctuation other than - and _ dropped, spaces as hyphens."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)  # a "# comment" in code is no heading
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in HEADING.findall(text)}


class DocsTest(parameterized.TestCase):

    @parameterized.named_parameters((page.stem, page) for page in DOCS)
    def test_each_page_stays_under_the_page_cap(self, page):
        self.assertLessEqual(len(page.read_bytes()), PAGE_CAP, f"{page.name}: cut it, or link the page that says it")

    def test_the_docs_together_stay_under_their_cap(self):
        sizes = {page.name: len(page.read_bytes()) for page in DOCS}
        self.assertLessEqual(sum(sizes.values()), DOCS_CAP, f"docs/*.md: cut repetition and derivations: {sizes}")

    @parameterized.named_parameters((page.stem, page) for page in PAGES)
    def test_no_page_tells_how_the_work_was_organised(self, page):
        lines = [f"{number}: {line}" for number, line in enumerate(page.read_text().splitlines(), start=1)
                 if ORGANISATION_WORDS.search(line)]
        self.assertEmpty(lines, f"{page.name} describes the work, not the product")

    @parameterized.named_parameters((page.stem, page) for page in PAGES)
    def test_no_page_tells_the_history_of_the_work(self, page):
        lines = [f"{number}: {line}" for number, line in enumerate(page.read_text().splitlines(), start=1)
                 if HISTORY_WORDS.search(line)]
        self.assertEmpty(lines, f"{page.name} tells history: state what the product does, with dated figures only")

    @parameterized.named_parameters(
        ("commit_range", "commits 9816f78..8009522", True), ("dashed_range", "commits 9816f78\u20138009522", True),
        ("commit_id", "commit 9ce214f, as it printed", True), ("previous", "the Previous placement", True),
        ("next_window", "The next window checks", True), ("date", "2026-11-26, 2 cores", False),
        ("number", "60,506,624 parameters, 1048576 values", False), ("word", "a faded facade", False),
        ("splitmix", "splitmix64 keys", False))
    def test_the_history_rule(self, text, caught):
        self.assertEqual(bool(HISTORY_WORDS.search(text)), caught, text)

    @parameterized.named_parameters((page.stem, page) for page in PAGES)
    def test_relative_links_resolve(self, page):
        for target, anchor in LINK.findall(page.read_text()):
            if "://" in target:
                continue
            path = (page.parent / target).resolve()
            self.assertTrue(path.is_file(), f"{page.name} links {target}, which does not exist")
            if anchor:
                self.assertIn(anchor[1:], anchors(path), f"{page.name} links {target}{anchor}: no such heading")

    def test_the_anchor_rule_on_a_heading_with_code_and_brackets(self):
        self.assertContainsSubset(["the-cpu-recipe", "what-was-tried-on-the-recipe-one-change-at-a-time",
                                   "content-metrics-t5kittrainpretrain_trainerpy"], anchors(REPO / "docs/quality.md"))


if __name__ == "__main__":
    absltest.main()
