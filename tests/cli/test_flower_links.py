"""A task's page in Flower gains a link to its job's page in covey ui, read from
the job the task's kwargs name; a page that names none is left as it was."""

from __future__ import annotations

from covey.cli.flower import linked

PAGE = b"""<dl>
      <div class="detail-row detail-row-code task-data-row">
        <dt>Arguments</dt>
        <dd><pre class="detail-code"><code>()</code></pre></dd>
      </div>
      <div class="detail-row detail-row-code task-data-row">
        <dt>Keyword arguments</dt>
        <dd><pre class="detail-code"><code>agent=root role=root depth=0 task=hi job=4f6c-9a</code></pre></dd>
      </div>
</dl>"""


def test_a_task_page_links_to_the_job_its_kwargs_name_before_its_kwargs():
    page = linked(PAGE, "http://ui.example:8600/").decode()
    link = '<dt>Job in covey ui</dt><dd><a class="covey-job" href="http://ui.example:8600/jobs/4f6c-9a">4f6c-9a</a>'
    assert link in page
    assert page.index(link) < page.index("<dt>Keyword arguments</dt>")
    start = page.index('<div class="detail-row"><dt>Job')
    end = page.index("</div>\n      ", start) + len("</div>\n      ")
    assert page[:start] + page[end:] == PAGE.decode()  # nothing else of the page changed


def test_a_page_without_a_job_or_a_kwargs_row_is_left_as_it_was():
    assert linked(PAGE.replace(b"job=4f6c-9a", b""), "http://ui") == PAGE.replace(b"job=4f6c-9a", b"")
    other = b"<h1>workers</h1> job=4f6c-9a"
    assert linked(other, "http://ui") == other


def test_the_link_is_escaped():
    page = linked(PAGE, 'http://ui"><script>').decode()
    assert "<script>" not in page and "&quot;&gt;&lt;script&gt;" in page
