package ai.arbor.task;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.en.EnglishAnalyzer;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;

/**
 * {@code kb}: two-hop questions over a generated knowledge base of people, cities and organisations,
 * answerable only by searching it (two searches each). The knowledge base is invented from a seed
 * (random names), so nothing about it can be known in advance or downloaded.
 *
 * <p>Facts: a person is employed by an organisation and was born in a city; an organisation was founded
 * by a person and is based in a city. One document per fact (title = its subject's name), always in one
 * layout, the fact's object last:
 * <pre>{@code The employer of NOXZ is GYPL.     The birthplace of NOXZ is MIJK.
 * The founder of GYPL is JXUE.      The city of GYPL is HWOZ.}</pre>
 * A search names the subject and the relation ({@code NOXZ employer}); BM25 ranks the one document with both
 * terms first. Question templates, each ending with the name to search first and needing the first hop's
 * answer as the second search:
 * <ul>
 *   <li>City of the employer of P? (search {@code P employer} → O, then {@code O city})
 *   <li>Founder of the employer of P? ({@code P employer} → O, then {@code O founder})
 *   <li>Birthplace of the founder of O? ({@code O founder} → F, then {@code F birthplace})
 * </ul>
 * The held-out split asks about people and organisations that no training question mentions.
 *
 * <p>Why this layout: the character-level policy must copy three names — the question's name into the first
 * search, the first result's object into the second search, the second result's object into the answer — and
 * the relation words from the question. Every name is {@value #NAME_CHARS} distinct capitals from
 * {@link #LETTERS} (letters that no capital of the fixed text uses), and the names of one fact share no letter,
 * so every letter of a copied name occurs in its result only inside that name (a copy that finds the letter
 * just written and takes the one after it, an induction head, is never misled); and every copied object ends
 * its result, so it lies at one distance back from where the policy writes the copy, whatever the question.
 * With this layout the character policy's cold start answers 0.98–1.00 of the held-out questions greedily on every
 * seed run at lr 5e-3 (bench/RESULTS.md, "kb with one fact per document").
 *
 * <p>The earlier layouts, one document per entity with all its facts ({@code NOXZ is employed by GYPL. NOXZ was
 * born in MIJK.}) searched by the name alone: with consonant–vowel names ({@code Zuga Nosi}) a 1000-step cold
 * start answered 0.14–0.195 of the held-out questions (greedy), miscopying letters that the result repeats; with
 * distinct-letter names a 2500-step one reached 0.485 and 0.640 on seeds 1 and 3 and 0.00 on seeds 2 and 4, and
 * even the seeds that learnt it answered only the founder questions, whose answer sits at the same offset as the
 * second search's name, never the city slot further on (bench/RESULTS.md, "The kb cold start with
 * distinct-letter names").
 */
public final class KbTask {
    /** A corpus document. */
    public record Doc(String id, String title, String text) {}

    /** Characters of every name (person, organisation, city). */
    static final int NAME_CHARS = 4;

    /**
     * The letters of names: capitals, none of which the fixed text around a name uses as a capital
     * ({@code Q:}, {@code City}, {@code Founder}, {@code Birthplace}, {@code Doc 1(Title: ...)}), and no
     * {@code S}, which the search's stemmer strips from a word's end.
     */
    static final String LETTERS = "AEGHIJKLMNOPRUVWXYZ";
    /** The relations, as the documents and the searches write them. */
    static final String EMPLOYER = "employer", BIRTHPLACE = "birthplace", FOUNDER = "founder", CITY = "city";
    /** Distinct names: ordered choices of {@value #NAME_CHARS} distinct letters. */
    private static final int WORDS = 19 * 18 * 17 * 16;
    /** Organisations, people and cities take about 6 names per organisation; at most a quarter of all names is drawn. */
    private static final int MAX_ORGS = WORDS / 4 / 6;

    private final List<Doc> corpus = new ArrayList<>();
    private final List<Problem> train = new ArrayList<>();
    private final List<Problem> heldOut = new ArrayList<>();

    public KbTask(long seed, int trainSize, int heldOutSize) {
        if (trainSize < 0 || heldOutSize < 0) throw new IllegalArgumentException("split sizes must be >= 0, got " + trainSize + ", " + heldOutSize);
        int nOrgs = Math.max(8, (trainSize + heldOutSize) / 6), nPeople = 4 * nOrgs, nCities = Math.max(12, nOrgs / 2);
        if (nOrgs > MAX_ORGS)
            throw new IllegalArgumentException("kb supports at most " + 6 * MAX_ORGS + " problems in all, got " + (trainSize + heldOutSize));
        Random rnd = new Random(seed);
        Names names = new Names(rnd);
        List<String> cities = new ArrayList<>();
        while (cities.size() < nCities) cities.add(names.draw(0));
        List<String> orgs = new ArrayList<>();
        while (orgs.size() < nOrgs) orgs.add(names.draw(0));
        // every document's names have pairwise disjoint letters: a person's employer and birthplace share no letter
        // with the person or each other, an organisation's founder and city none with it or each other
        Map<String, String> employer = new LinkedHashMap<>(), birthplace = new LinkedHashMap<>();
        Map<String, String> hq = new LinkedHashMap<>(), founder = new LinkedHashMap<>();
        List<String> people = new ArrayList<>();
        while (people.size() < nPeople) {
            String o = orgs.get(rnd.nextInt(orgs.size())), p = names.draw(mask(o));
            people.add(p);
            employer.put(p, o);
            birthplace.put(p, city(cities, mask(p) | mask(o), names, rnd));
        }
        for (String o : orgs) {
            List<String> eligible = new ArrayList<>();
            for (int i = 0; i < nPeople; i++) if ((mask(people.get(i)) & mask(o)) == 0) eligible.add(people.get(i));
            String f;
            if (!eligible.isEmpty()) f = eligible.get(rnd.nextInt(eligible.size()));
            else {   // no person fits (only in tiny knowledge bases): a new one, employed by another organisation
                String e = orgs.get(rnd.nextInt(orgs.size()));
                f = names.draw(mask(o) | mask(e));
                people.add(f);
                employer.put(f, e);
                birthplace.put(f, city(cities, mask(f) | mask(e), names, rnd));
            }
            founder.put(o, f);
            hq.put(o, city(cities, mask(o) | mask(f), names, rnd));
        }
        // one document per fact, the name it states last: a search names the subject and the relation
        for (String p : people) {
            corpus.add(fact(p, EMPLOYER, employer.get(p)));
            corpus.add(fact(p, BIRTHPLACE, birthplace.get(p)));
        }
        for (String o : orgs) {
            corpus.add(fact(o, FOUNDER, founder.get(o)));
            corpus.add(fact(o, CITY, hq.get(o)));
        }

        // held-out questions come from the last quarter of the first nPeople people and of the organisations, train
        // from the rest (founders added for tiny knowledge bases are asked about in no question)
        int pCut = nPeople * 3 / 4, oCut = orgs.size() * 3 / 4;
        List<Problem> pool = new ArrayList<>();
        for (int i = 0; i < nPeople; i++) {
            String p = people.get(i), o = employer.get(p);
            boolean test = i >= pCut;
            pool.add(problem(test, "City of the employer of " + p + "?", hq.get(o), p, EMPLOYER, o, CITY));
            pool.add(problem(test, "Founder of the employer of " + p + "?", founder.get(o), p, EMPLOYER, o, FOUNDER));
        }
        for (int i = 0; i < orgs.size(); i++) {
            String o = orgs.get(i), f = founder.get(o);
            pool.add(problem(i >= oCut, "Birthplace of the founder of " + o + "?", birthplace.get(f), o, FOUNDER, f, BIRTHPLACE));
        }
        java.util.Collections.shuffle(pool, rnd);
        for (Problem p : pool) {
            boolean test = p.id().startsWith("test");
            if (test && heldOut.size() < heldOutSize) heldOut.add(renumber(p, "kb-test-" + heldOut.size()));
            else if (!test && train.size() < trainSize) train.add(renumber(p, "kb-train-" + train.size()));
        }
        if (train.size() < trainSize || heldOut.size() < heldOutSize)
            throw new IllegalStateException("knowledge base too small for the requested splits");
    }

    /** A city sharing no letter with {@code avoid} (a letter mask), drawn from the existing ones, else a new one. */
    private static String city(List<String> cities, int avoid, Names names, Random rnd) {
        List<String> eligible = new ArrayList<>();
        for (String c : cities) if ((mask(c) & avoid) == 0) eligible.add(c);
        if (!eligible.isEmpty()) return eligible.get(rnd.nextInt(eligible.size()));
        String c = names.draw(avoid);
        cities.add(c);
        return c;
    }

    /** The set of a name's letters, one bit per letter A..Z. */
    static int mask(String name) {
        int m = 0;
        for (int i = 0; i < name.length(); i++) m |= 1 << (name.charAt(i) - 'A');
        return m;
    }

    /**
     * Draws distinct names of {@value #NAME_CHARS} distinct {@link #LETTERS}. No two names index alike: each is
     * exactly one term of the search's analyzer (lower case, stop words, Porter stemming) and no two share it.
     */
    private static final class Names {
        private final Random rnd;
        private final Set<String> terms = new HashSet<>();
        private final Analyzer analyzer = new EnglishAnalyzer();

        Names(Random rnd) {
            this.rnd = rnd;
        }

        /** A new name using no letter in {@code avoid}. */
        String draw(int avoid) {
            StringBuilder allowed = new StringBuilder();
            for (char c : LETTERS.toCharArray()) if ((avoid & (1 << (c - 'A'))) == 0) allowed.append(c);
            if (allowed.length() < NAME_CHARS) throw new IllegalArgumentException("only the letters " + allowed + " are left for a name");
            while (true) {
                StringBuilder left = new StringBuilder(allowed), name = new StringBuilder(NAME_CHARS);
                for (int i = 0; i < NAME_CHARS; i++) {
                    int k = rnd.nextInt(left.length());
                    name.append(left.charAt(k));
                    left.deleteCharAt(k);
                }
                String n = name.toString(), t = term(n);
                if (t != null && terms.add(t)) return n;
            }
        }

        /** The single term the analyzer makes of {@code name}, or null when it makes none or several. */
        private String term(String name) {
            try (TokenStream ts = analyzer.tokenStream("f", name)) {
                CharTermAttribute a = ts.addAttribute(CharTermAttribute.class);
                ts.reset();
                String t = ts.incrementToken() ? a.toString() : null;
                if (t != null && ts.incrementToken()) t = null;
                ts.end();
                return t;
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
    }

    private static Problem problem(boolean test, String question, String answer, String hop1, String rel1, String hop2, String rel2) {
        return new Problem(test ? "test" : "train", question, List.of(answer),
                List.of(new Problem.ToolStep("search", query(hop1, rel1)), new Problem.ToolStep("search", query(hop2, rel2))));
    }

    /** The search for one fact: the subject's name, a space, the relation ({@code "NOXZ employer"}). */
    static String query(String name, String relation) {
        return name + " " + relation;
    }

    /** The name a search of {@link #query} form asks about (its first {@value #NAME_CHARS} characters). */
    public static String subject(String query) {
        if (query.length() < NAME_CHARS) throw new IllegalArgumentException("not a kb search (name, space, relation): '" + query + "'");
        return query.substring(0, NAME_CHARS);
    }

    /** The document stating one fact: {@code "The employer of NOXZ is GYPL."}, titled with the subject. */
    private Doc fact(String subject, String relation, String object) {
        return new Doc("f" + corpus.size(), subject, "The " + relation + " of " + subject + " is " + object + ".");
    }

    private static Problem renumber(Problem p, String id) {
        return new Problem(id, p.question(), p.answers(), p.plan());
    }

    public List<Doc> corpus() {
        return corpus;
    }

    public List<Problem> train() {
        return train;
    }

    public List<Problem> heldOut() {
        return heldOut;
    }
}
