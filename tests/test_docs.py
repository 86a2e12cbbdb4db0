"""The docs describe the product: a size cap on the pages that grow with every measurement, no word of how the work
was organised, and every relative link (and its #anchor) pointing at a file and heading that exist."""
import re

from absl.testing import absltest, parameterized

from tests.helpers import REPO

PAGES = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]
# Pages with a cap of their own (the README's 12 KB is checked in tests/test_layout.py).
PAGE_CAPS = {"docs/quality.md": 12 * 1024}
# Words about how the work was done rather than what the code does: sessions, issue numbers.
ORGANISATION_WORDS = re.compile(r"\bsessions?\b|\bissues? ?#?\d+|\bPR ?#\d+", re.IGNORECASE)
LINK = re.compile(r"\]\(([^)\s]+?\.md)(#[^)\s]*)?\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.MULTILINE)


def anchors(page):
    """GitHub's heading anchors: lower case, punctuation other than - and _ dropped, spaces as hyphens."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)  # a "# comment" in code is no heading
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in HEADING.findall(text)}


class DocsTest(parameterized.TestCase):

    @parameterized.named_parameters((name.replace("/", "_"), name, cap) for name, cap in PAGE_CAPS.items())
    def test_capped_pages_stay_under_their_cap(self, name, cap):
        self.assertLessEqual(len((REPO / name).read_bytes()), cap, f"{name}: move what does not describe the "
                                                                      "product to an appendix page, or cut it")

    @parameterized.named_parameters((page.stem, page) for page in PAGES)
    def test_no_page_tells_how_the_work_was_organised(self, page):
        lines = [f"{number}: {line}" for number, line in enumerate(page.read_text().splitlines(), start=1)
                 if ORGANISATION_WORDS.search(line)]
        self.assertEmpty(lines, f"{page.name} describes the work, not the product")

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
